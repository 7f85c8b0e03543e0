# spora_option(NAME DEFAULT DOC): a cache variable taking AUTO, ON or OFF.
function(spora_option name default doc)
  set(${name} ${default} CACHE STRING "${doc} (AUTO|ON|OFF)")
  set_property(CACHE ${name} PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "${${name}}" v)
  if(NOT v MATCHES "^(AUTO|ON|OFF|TRUE|FALSE|1|0|YES|NO)$")
    message(FATAL_ERROR "${name}=${${name}}: expected AUTO, ON or OFF")
  endif()
endfunction()

# spora_feature(NAME FOUND OUT): resolves a tri-state option against whether
# its toolchain was found. ON without the toolchain is a configure error.
function(spora_feature name found out)
  string(TOUPPER "${${name}}" v)
  if(v MATCHES "^(OFF|FALSE|0|NO)$")
    set(${out} OFF PARENT_SCOPE)
  elseif(found)
    set(${out} ON PARENT_SCOPE)
  elseif(v STREQUAL "AUTO")
    set(${out} OFF PARENT_SCOPE)
  else()
    message(FATAL_ERROR "${name}=ON but its toolchain was not found")
  endif()
endfunction()
