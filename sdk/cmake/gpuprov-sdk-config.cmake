# find_package(gpuprov-sdk) for third-party drivers: gives gpuprov::sdk and gpuprov_add_driver().
include("${CMAKE_CURRENT_LIST_DIR}/gpuprov-sdk-targets.cmake")
function(gpuprov_add_driver name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBRARIES" ${ARGN})
  add_library(gpuprov-driver-${name} MODULE ${ARG_SOURCES})
  target_link_libraries(gpuprov-driver-${name} PRIVATE gpuprov::sdk ${ARG_LIBRARIES})
  set_target_properties(gpuprov-driver-${name} PROPERTIES PREFIX "lib"
    CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
endfunction()
