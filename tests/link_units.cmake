# Checks that core's two link units stay apart (core/CMakeLists.txt): gpuprov_base, whose
# objects the gpuprov executable links, must not reach a header of core/remote/, which only
# libgpuprov-remote.so links. Run by ctest as
#   cmake -DCXX=... -DCORE_DIR=... -DBASE_INCLUDES=a|b -DREMOTE_INCLUDES=c|d -P <this>
# 1. gpuprov_base's include path does not hold core/remote;
# 2. a file including a remote header fails to compile with that path, and compiles once
#    gpuprov_remote's folder is added (so the failure is the missing folder, nothing else);
# 3. no base source or header (core/*.h, core/*.cc, core/*.cc.in; tests excepted) names a
#    remote header, by its name or as "remote/...".
cmake_policy(VERSION 3.20)
foreach(var CXX CORE_DIR BASE_INCLUDES REMOTE_INCLUDES)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "link_units.cmake needs -D${var}=...")
  endif()
endforeach()
string(REPLACE "|" ";" base_includes "${BASE_INCLUDES}")
string(REPLACE "|" ";" remote_includes "${REMOTE_INCLUDES}")
get_filename_component(remote_dir "${CORE_DIR}/remote" ABSOLUTE)
set(failures "")

foreach(dir IN LISTS base_includes)
  get_filename_component(dir "${dir}" ABSOLUTE)
  if(dir STREQUAL remote_dir)
    string(APPEND failures "gpuprov_base has ${remote_dir} on its include path\n")
  endif()
endforeach()

file(GLOB remote_headers RELATIVE ${remote_dir} ${remote_dir}/*.h)
if(NOT remote_headers)
  message(FATAL_ERROR "no header in ${remote_dir}")
endif()
# ssh_client.h: a remote header whose own includes are system headers and base ones.
set(probe_header ssh_client.h)
if(NOT probe_header IN_LIST remote_headers)
  message(FATAL_ERROR "no ${remote_dir}/${probe_header}")
endif()
set(probe ${CMAKE_CURRENT_BINARY_DIR}/link_units_probe.cc)
file(WRITE ${probe} "#include \"${probe_header}\"\n")
function(compile out_result out_text)
  set(args -std=c++20 -fsyntax-only)
  foreach(dir IN LISTS ARGN)
    list(APPEND args -I${dir})
  endforeach()
  execute_process(COMMAND ${CXX} ${args} ${probe} RESULT_VARIABLE result OUTPUT_VARIABLE text
                  ERROR_VARIABLE text)
  set(${out_result} ${result} PARENT_SCOPE)
  set(${out_text} "${text}" PARENT_SCOPE)
endfunction()
compile(result text ${base_includes})
if(result EQUAL 0)
  string(APPEND failures "#include \"${probe_header}\" compiles with gpuprov_base's include path\n")
# gcc: "ssh_client.h: No such file or directory"; clang: "'ssh_client.h' file not found".
elseif(NOT text MATCHES "${probe_header}: No such file|'${probe_header}' file not found")
  string(APPEND failures "#include \"${probe_header}\" fails for another reason than the missing "
                         "folder:\n${text}\n")
else()
  message(STATUS "#include \"${probe_header}\" does not build with gpuprov_base's include path")
endif()
compile(result text ${base_includes} ${remote_includes})
if(NOT result EQUAL 0)
  string(APPEND failures "#include \"${probe_header}\" does not compile with gpuprov_remote's "
                         "include path either:\n${text}\n")
endif()
file(REMOVE ${probe})

file(GLOB base_files ${CORE_DIR}/*.h ${CORE_DIR}/*.cc ${CORE_DIR}/*.cc.in)
list(FILTER base_files EXCLUDE REGEX "(_test\\.cc|_test_util\\.h|/test_support\\.h)$")
foreach(file IN LISTS base_files)
  file(STRINGS ${file} includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^[ \t]*#[ \t]*include[ \t]*\"([^\"]*)\".*" "\\1" name "${line}")
    list(FIND remote_headers "${name}" found)
    if(name MATCHES "^remote/" OR NOT found EQUAL -1)
      file(RELATIVE_PATH shown ${CORE_DIR}/.. ${file})
      string(APPEND failures "${shown} (gpuprov_base) includes \"${name}\", a header of core/remote/\n")
    endif()
  endforeach()
endforeach()
list(LENGTH base_files base_count)
message(STATUS "${base_count} base files include no remote header")

if(failures)
  message(FATAL_ERROR "core's link units cross:\n${failures}")
endif()
