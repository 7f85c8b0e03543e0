# spora_add_plugin(NAME <name> KIND device|collective SOURCES ... [LIBRARIES ...])
#
# Builds a Spora plugin as a MODULE library named libspora-<kind>-<name>.so
# with hidden visibility and a version script that exports only
# spora_plugin_probe_v1 and spora_plugin_entry_v1. The target is called
# spora-<kind>-<name>. In-tree and out-of-tree plugins use this same function.
set(_SPORA_ADD_PLUGIN_DIR ${CMAKE_CURRENT_LIST_DIR})

function(spora_add_plugin)
  cmake_parse_arguments(P "" "NAME;KIND;OUTPUT_DIRECTORY;INSTALL_DESTINATION" "SOURCES;LIBRARIES" ${ARGN})
  if(NOT P_NAME OR NOT P_KIND OR NOT P_SOURCES)
    message(FATAL_ERROR "spora_add_plugin: NAME, KIND and SOURCES are required")
  endif()
  if(NOT P_KIND MATCHES "^(device|collective)$")
    message(FATAL_ERROR "spora_add_plugin(${P_NAME}): KIND must be device or collective, got '${P_KIND}'")
  endif()
  set(target spora-${P_KIND}-${P_NAME})
  add_library(${target} MODULE ${P_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib" OUTPUT_NAME "spora-${P_KIND}-${P_NAME}"
    C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  if(P_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${P_OUTPUT_DIRECTORY})
  elseif(SPORA_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${SPORA_PLUGIN_OUTPUT_DIR})
  endif()
  target_link_options(${target} PRIVATE
    "LINKER:--version-script=${_SPORA_ADD_PLUGIN_DIR}/plugin.map" "LINKER:--no-undefined")
  if(TARGET Spora::plugin_api)
    target_link_libraries(${target} PRIVATE Spora::plugin_api)
  endif()
  if(P_LIBRARIES)
    target_link_libraries(${target} PRIVATE ${P_LIBRARIES})
  endif()
  if(NOT P_INSTALL_DESTINATION)
    # Next to libspora.so: the loader searches <dir of libspora.so>/spora/plugins.
    if(CMAKE_INSTALL_LIBDIR)
      set(P_INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/spora/plugins)
    else()
      set(P_INSTALL_DESTINATION lib/spora/plugins)
    endif()
  endif()
  install(TARGETS ${target} LIBRARY DESTINATION ${P_INSTALL_DESTINATION} COMPONENT spora-plugin-${P_NAME})
endfunction()
