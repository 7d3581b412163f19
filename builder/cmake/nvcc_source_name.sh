#!/bin/sh
# CUDA compiler launcher: nvcc_source_name.sh FROM=TO... -- [LAUNCHER...] NVCC ARGS...
#
# nvcc's front end (cudafe++) names every anonymous namespace after a hash of the source file's
# absolute path (_GLOBAL__N__<hash>_<length>_<file>...), and those names reach the object's
# symbol table and its device code: two builds of one source in two directories differ. This
# runs the command with the source (the argument after -c) named as the prefix maps name it,
# /infini-stack/src/<component>/..., through cudafe++'s --orig_src_path_name and
# --orig_src_file_name. A translation unit with no external definition of its own to anchor such
# a name to (only explicit instantiations, say) gets one drawn from cudafe++'s process id, as
# GCC's without -frandom-seed; cudafe++ takes the same option, and the mapped name is the seed.
# A source under no map is compiled as it is.
maps=""
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  maps="$maps
$1"
  shift
done
[ "$#" -gt 0 ] && shift  # --
source=""
previous=""
for argument in "$@"; do
  [ "$previous" = "-c" ] && source=$argument
  previous=$argument
done
named=""
if [ -n "$source" ]; then
  old_ifs=$IFS
  IFS='
'
  for map in $maps; do
    from=${map%%=/infini-stack/*}
    to=${map#"$from="}
    case $source in
      "$from"/*) named="$to${source#"$from"}"; break ;;
    esac
  done
  IFS=$old_ifs
fi
if [ -z "$named" ]; then
  exec "$@"
fi
exec "$@" -Xcudafe "--orig_src_path_name=$named" -Xcudafe "--orig_src_file_name=$named" \
  -Xcudafe "--frandom-seed=$named"
