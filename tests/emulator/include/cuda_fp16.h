/* The half-precision header, for the emulator: the project's kernels use
 * CUDA's half intrinsics only where __CUDA_ARCH__ is defined, which it is
 * not here (kernels/fp16.h then converts in plain C). */
#ifndef TESTS_EMULATOR_INCLUDE_CUDA_FP16_H
#define TESTS_EMULATOR_INCLUDE_CUDA_FP16_H
#endif
