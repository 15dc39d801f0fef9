# CPACK_PRE_BUILD_SCRIPTS: runs after CPack installed a package's files into its staging folder
# (CPACK_TEMPORARY_INSTALL_DIRECTORY) and before it packs them. Debian ships manual pages
# compressed with gzip -9n (no name or time stamp inside); `cmake --install` keeps them plain.
file(GLOB_RECURSE man_pages LIST_DIRECTORIES false "${CPACK_TEMPORARY_INSTALL_DIRECTORY}/*")
list(FILTER man_pages INCLUDE REGEX "/share/man/man[1-9]/[^/]+\\.[1-9]$")
foreach(page IN LISTS man_pages)
  execute_process(COMMAND gzip -9 -n -f "${page}" RESULT_VARIABLE result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "gzip -9 -n ${page} failed: ${result}")
  endif()
endforeach()
