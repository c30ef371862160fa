#!/bin/sh
# Keep the machine code (SASS) of one compiled kernel object, for the
# instruction budget (common/sass.h).
#   record-sass.sh CUOBJDUMP OBJECT RECORD
# cuobjdump -sass prints every kernel as "Function : MANGLED" followed by
# its instructions, "/*0270*/  LDG.E R28, desc[UR10][R12.64] ;", each with
# its 128-bit encoding in comments beside and below it. The record keeps
# the function lines, demangled by c++filt, and the instructions without
# their encodings: a tenth of the size, and all that the count needs.
set -u
cuobjdump=$1
object=$2
record=$3
listing=$("$cuobjdump" -sass "$object") || exit 1
printf '%s\n' "$listing" |
    sed -n -e 's/^[[:space:]]*Function : \(.*\)$/Function : \1/p' \
           -e 's/^[[:space:]]*\(\/\*[0-9a-f]*\*\/\)[[:space:]]*\([^;]*;\).*$/\1 \2/p' |
    c++filt > "$record"
