/* The half-precision header, for the emulator: the project's kernels use
 * CUDA's half intrinsics only where __CUDA_ARCH__ is defined, which it is
 * not here (kernels/fp16.h then converts in plain C). */
#ifndef EMULATOR_CUDA_FP16_H
#define EMULATOR_CUDA_FP16_H
#endif
