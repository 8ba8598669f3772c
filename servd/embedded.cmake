# servd/embedded.cmake - the built-in sample site (included from the top-level
# CMakeLists.txt after the servd target).
#
# At build time the just-built servd-pack packs www/ into
# ${CMAKE_BINARY_DIR}/builtin-site.lmdb, and the generated
# servd_embedded_site.c links those bytes into servd (servd/embedded.c serves
# them when servd runs without --pack). The pack is reproducible: every
# Last-Modified is SOURCE_DATE_EPOCH (taken from the environment at configure
# time, or the fixed date below), so two builds of the same www/ embed the
# same bytes whatever the checkout's file times.

if(NOT TARGET servd)
  return()
endif()

# 2026-01-01T00:00:00Z: a fixed Last-Modified for the built-in site when the
# build does not set SOURCE_DATE_EPOCH itself.
set(SERVD_BUILTIN_EPOCH 1767225600)
if(DEFINED ENV{SOURCE_DATE_EPOCH})
  set(SERVD_BUILTIN_EPOCH $ENV{SOURCE_DATE_EPOCH})
endif()

set(SV_EMBEDDED_SRC ${CMAKE_BINARY_DIR}/servd_embedded_site.c)
if(TARGET servd-pack)
  set(SV_EMBEDDED_PACK ${CMAKE_BINARY_DIR}/builtin-site.lmdb)
  set(SV_EMBEDDED_HAVE 1)
  file(GLOB_RECURSE SV_WWW_FILES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/www/*)
  # Built under a temporary name and renamed, so that an interrupted build
  # never leaves a half-written pack that looks up to date.
  add_custom_command(
    OUTPUT ${SV_EMBEDDED_PACK}
    COMMAND ${CMAKE_COMMAND} -E env SOURCE_DATE_EPOCH=${SERVD_BUILTIN_EPOCH}
            $<TARGET_FILE:servd-pack> build ${CMAKE_SOURCE_DIR}/www -o ${SV_EMBEDDED_PACK}.tmp
            --quiet
    COMMAND ${CMAKE_COMMAND} -E rename ${SV_EMBEDDED_PACK}.tmp ${SV_EMBEDDED_PACK}
    DEPENDS servd-pack ${SV_WWW_FILES}
    COMMENT "Packing www/ as servd's built-in site"
    VERBATIM)
else()
  set(SV_EMBEDDED_PACK "")
  set(SV_EMBEDDED_HAVE 0)
endif()

configure_file(${CMAKE_SOURCE_DIR}/servd/embedded_site.c.in ${SV_EMBEDDED_SRC} @ONLY)
target_sources(servd PRIVATE ${SV_EMBEDDED_SRC})
if(SV_EMBEDDED_HAVE)
  # The .incbin reads the pack: rebuild the object whenever it changes, and
  # make the servd target run the packing command first.
  target_sources(servd PRIVATE ${SV_EMBEDDED_PACK})
  set_source_files_properties(${SV_EMBEDDED_SRC} PROPERTIES OBJECT_DEPENDS ${SV_EMBEDDED_PACK})
endif()
