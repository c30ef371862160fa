#!/bin/sh
# Rewrite a CUDA source for the CPU emulator: cuda-to-cpp.sh FILE.cu > FILE.cpp
# The kernel source stays as nvcc reads it; only this copy changes, in
# three places that no macro can reach:
#   name<<<grid, block, shared>>>(args)   ->  EMU_LAUNCH(name)(grid, block, shared)(args)
#       (name may be a template, kernel<4, 1>; the configuration may span lines)
#   extern __shared__ T name[];           ->  T *const name = static_cast<T *>(emu::dynamic_shared());
#   __shared__ T name[n];                 ->  the same, then EMU_POISON_SHARED(name);
# A #line directive keeps the compiler's messages and __FILE__ on FILE.cu.
set -eu
[ $# -eq 1 ] || { echo "usage: cuda-to-cpp.sh FILE.cu" >&2; exit 2; }
printf '#line 1 "%s"\n' "$1"
sed -e 's/\([A-Za-z_][A-Za-z0-9_]*\(<[^<>;]*>\)\{0,1\}\)<<</EMU_LAUNCH(\1)(/g' \
    -e 's/>>>[[:space:]]*(/)(/g' \
    -e 's/extern __shared__ \{1,\}\(__align__([0-9]*) \{1,\}\)\{0,1\}\([^;]*[^ ]\) \{1,\}\([A-Za-z_][A-Za-z0-9_]*\)\[\];/\2 *const \3 = static_cast<\2 *>(::emu::dynamic_shared());/' \
    -e 's/^\([[:space:]]*__shared__ [^;[]* \([A-Za-z_][A-Za-z0-9_]*\)\(\[[^;]*\]\)\{0,1\};\)/\1 EMU_POISON_SHARED(\2);/' \
    "$1"
