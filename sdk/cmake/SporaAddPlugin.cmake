# spora_add_plugin(): build a Spora device or collective plugin.
#
#   spora_add_plugin(NAME <name> KIND device|collective SOURCES <file>...
#                    [LINK <library-or-target>...]
#                    [OUTPUT_DIRECTORY <dir>] [DESTINATION <dir>]
#                    [COMPONENT <component>] [NO_INSTALL])
#
# Makes the MODULE library libspora-<kind>-<name>.so (target
# spora-<kind>-<name>) the way the loader expects it:
#   - C and C++ symbols hidden by default, and a linker version script
#     (plugin.map, next to this file) that exports only spora_plugin_probe_v1
#     and spora_plugin_entry_v1, so two plugins built from similar code can
#     never bind to each other's functions inside one process;
#   - --no-undefined, so a missing symbol is a link error here rather than a
#     dlopen failure on a user's machine;
#   - compiled against Spora::plugin_api (spora/plugin.h) and nothing else of
#     Spora: a plugin never links libspora.
#
# NAME is what users select ("cpu", "sim:0", spora.set_device("<name>")):
# lower-case letters, digits and '_', starting with a letter.
# LINK lists what the plugin itself links (driver libraries, targets).
# OUTPUT_DIRECTORY is where the build puts the file; by default the
# directory SPORA_PLUGIN_OUTPUT_DIR names (Spora's own build uses its
# lib/spora/plugins so the loader finds in-tree plugins without installing),
# else CMake's normal library output directory. Point SPORA_PLUGIN_PATH at it
# to use a plugin without installing it.
# DESTINATION is where `cmake --install` puts it: by default
# SPORA_PLUGIN_INSTALL_DIR (relative to the install prefix; the installed
# Spora package sets it to the plugin directory of its own layout, e.g.
# lib/spora/plugins, which the loader searches next to libspora.so). Use
# ${Spora_PLUGIN_DIR} to install into the very prefix Spora came from.
# COMPONENT names the install component (default spora-plugin-<name>, which
# Spora's packaging turns into a Debian package of that name).
# NO_INSTALL adds no install rule at all (test plugins that must never ship).
#
# In-tree and out-of-tree plugins use this same function; the installed copy
# lives in <prefix>/lib/cmake/Spora and comes with find_package(Spora).
include_guard(GLOBAL)

function(spora_add_plugin)
  cmake_parse_arguments(P "NO_INSTALL" "NAME;KIND;OUTPUT_DIRECTORY;DESTINATION;COMPONENT" "SOURCES;LINK" ${ARGN})
  # plugin.map sits next to this file, in-tree and installed alike.
  set(map ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/plugin.map)
  set(where "spora_add_plugin() called from ${CMAKE_CURRENT_LIST_FILE}")
  if(P_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "${where}: unknown arguments '${P_UNPARSED_ARGUMENTS}'. "
      "Expected NAME, KIND, SOURCES, LINK, OUTPUT_DIRECTORY, DESTINATION, COMPONENT, NO_INSTALL")
  endif()
  if(NOT P_NAME)
    message(FATAL_ERROR "${where}: NAME is missing; give the name users select the plugin by, e.g. NAME myaccel")
  endif()
  if(NOT P_NAME MATCHES "^[a-z][a-z0-9_]*$")
    message(FATAL_ERROR "${where}: NAME '${P_NAME}' is not a plugin name; use lower-case letters, digits and '_', "
      "starting with a letter (users type it as '${P_NAME}:0')")
  endif()
  if(NOT P_KIND)
    message(FATAL_ERROR "${where}: KIND is missing for plugin '${P_NAME}'; give KIND device or KIND collective")
  endif()
  if(NOT P_KIND MATCHES "^(device|collective)$")
    message(FATAL_ERROR "${where}: KIND must be device or collective, got '${P_KIND}' (plugin '${P_NAME}')")
  endif()
  if(NOT P_SOURCES)
    message(FATAL_ERROR "${where}: SOURCES is missing for plugin '${P_NAME}'; list the plugin's .c/.cpp files")
  endif()
  if(NOT TARGET Spora::plugin_api)
    message(FATAL_ERROR "${where}: the target Spora::plugin_api does not exist; call find_package(Spora) first")
  endif()

  set(target spora-${P_KIND}-${P_NAME})
  add_library(${target} MODULE ${P_SOURCES})
  set_target_properties(${target} PROPERTIES
    PREFIX "lib" OUTPUT_NAME "spora-${P_KIND}-${P_NAME}" SUFFIX ".so"
    C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
  if(P_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${P_OUTPUT_DIRECTORY})
  elseif(SPORA_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${SPORA_PLUGIN_OUTPUT_DIR})
  endif()
  target_link_options(${target} PRIVATE
    "LINKER:--version-script=${map}" "LINKER:--no-undefined")
  set_property(TARGET ${target} APPEND PROPERTY LINK_DEPENDS ${map})
  target_link_libraries(${target} PRIVATE Spora::plugin_api)
  if(P_LINK)
    target_link_libraries(${target} PRIVATE ${P_LINK})
  endif()

  if(P_NO_INSTALL)
    return()
  endif()
  if(NOT P_DESTINATION)
    if(SPORA_PLUGIN_INSTALL_DIR)
      set(P_DESTINATION ${SPORA_PLUGIN_INSTALL_DIR})
    elseif(CMAKE_INSTALL_LIBDIR)
      set(P_DESTINATION ${CMAKE_INSTALL_LIBDIR}/spora/plugins)
    else()
      set(P_DESTINATION lib/spora/plugins)
    endif()
  endif()
  if(NOT P_COMPONENT)
    set(P_COMPONENT spora-plugin-${P_NAME})
  endif()
  install(TARGETS ${target} LIBRARY DESTINATION ${P_DESTINATION} COMPONENT ${P_COMPONENT})
endfunction()
