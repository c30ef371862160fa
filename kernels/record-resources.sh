#!/bin/sh
# Compile one kernel file with nvcc and record what ptxas says about every
# kernel in it: registers, spills, stack frame and static shared memory.
#   record-resources.sh RECORD NVCC [NVCC ARGUMENTS...]
# nvcc --resource-usage has ptxas print those lines on stderr, where a
# warning or an error would also go. RECORD gets all of stderr with the C++
# names demangled by c++filt ("void layernorm_backward_v2<4, 8>(float*, ...)"
# for "_Z21layernorm_backward_v2ILi4ELi8E..."); common/kernel_resources.c
# reads it. Whatever is not ptxas's report is shown as well, as nvcc would
# have shown it. The exit status is nvcc's.
set -u
record=$1
shift
"$@" --resource-usage 2> "$record"
status=$?
grep -v -e '^ptxas info' -e '^ *[0-9]* bytes stack frame' "$record" >&2
# c++filt cannot write where it reads: the record is small, a variable holds it.
demangled=$(c++filt < "$record") || exit 1
printf '%s\n' "$demangled" > "$record"
exit $status
