# What `cmake --install` and cpack put where (packaging/layout.cmake names the folders). Two
# components, one Debian package each (CPackConfig.cmake): `pipestudio` (the GUI, the CLI, data,
# documentation, desktop integration) and `engine` (pipestudio-engine, the one that needs
# libtorch). The programs' own install rules are in app/CMakeLists.txt.
set(_ps_doc_files ${PROJECT_SOURCE_DIR}/packaging/debian/copyright ${PROJECT_BINARY_DIR}/packaging/changelog.Debian.gz)

# Debian's changelog, compressed as Debian ships it (gzip -9n: no name, no time stamp); redone
# when the changelog changes.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/packaging/debian/changelog)
file(MAKE_DIRECTORY ${PROJECT_BINARY_DIR}/packaging)
execute_process(COMMAND gzip -9n -c ${PROJECT_SOURCE_DIR}/packaging/debian/changelog
                OUTPUT_FILE ${PROJECT_BINARY_DIR}/packaging/changelog.Debian.gz COMMAND_ERROR_IS_FATAL ANY)

# --- pipestudio
install(FILES ${CMAKE_CURRENT_LIST_DIR}/pipestudio.desktop DESTINATION ${CMAKE_INSTALL_DATADIR}/applications
        COMPONENT pipestudio)
install(FILES ${CMAKE_CURRENT_LIST_DIR}/io.pipestudio.PipeStudio.metainfo.xml
        DESTINATION ${CMAKE_INSTALL_DATADIR}/metainfo COMPONENT pipestudio)
install(FILES ${CMAKE_CURRENT_LIST_DIR}/pipestudio-mime.xml DESTINATION ${CMAKE_INSTALL_DATADIR}/mime/packages
        RENAME pipestudio.xml COMPONENT pipestudio)
install(FILES ${PROJECT_SOURCE_DIR}/resources/icons/pipestudio.svg
        DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps COMPONENT pipestudio)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/resources/icons/hicolor/ DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor
        COMPONENT pipestudio FILES_MATCHING PATTERN "*.png")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/resources/schedules ${PROJECT_SOURCE_DIR}/resources/profiles
        DESTINATION ${PS_INSTALL_DATADIR} COMPONENT pipestudio)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/resources/examples DESTINATION ${PS_INSTALL_DATADIR} COMPONENT pipestudio
        PATTERN "*.sh" EXCLUDE)
# The documentation (Help › Documentation opens gui.md) with the pictures it shows.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${PS_INSTALL_DOCDIR} COMPONENT pipestudio
        FILES_MATCHING PATTERN "*.md" PATTERN "*.png")
install(FILES ${_ps_doc_files} DESTINATION ${PS_INSTALL_DOCDIR} COMPONENT pipestudio)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/debian/pipestudio.lintian-overrides
        DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides RENAME pipestudio COMPONENT pipestudio)

# Man pages from the programs' --help (packaging/man/make_man.sh, help2man).
find_program(PS_HELP2MAN help2man)
if(PS_HELP2MAN AND NOT PIPESTUDIO_FUZZ AND NOT CMAKE_CXX_FLAGS MATCHES "-fsanitize")
  set(_ps_man_pages)
  set(_ps_man_pipestudio-cli "design, check, simulate and run pipeline-parallel training schedules")
  set(_ps_man_pipestudio "designer and debugger for pipeline-parallel training schedules")
  foreach(_ps_program pipestudio-cli pipestudio)
    if(NOT TARGET ${_ps_program})
      continue()
    endif()
    set(_ps_page ${PROJECT_BINARY_DIR}/man/${_ps_program}.1.gz)
    set(_ps_deps ${_ps_program} ${CMAKE_CURRENT_LIST_DIR}/man/${_ps_program}.h2m ${CMAKE_CURRENT_LIST_DIR}/man/make_man.sh)
    if(_ps_program STREQUAL "pipestudio-cli" AND TARGET pipestudio-engine)
      list(APPEND _ps_deps pipestudio-engine)  # run --help and profile --help answer through it
    endif()
    add_custom_command(OUTPUT ${_ps_page}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${PROJECT_BINARY_DIR}/man
      COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/man/make_man.sh $<TARGET_FILE:${_ps_program}> ${PROJECT_VERSION}
              "${_ps_man_${_ps_program}}" ${CMAKE_CURRENT_LIST_DIR}/man/${_ps_program}.h2m ${_ps_page}
      DEPENDS ${_ps_deps} VERBATIM)
    list(APPEND _ps_man_pages ${_ps_page})
  endforeach()
  add_custom_target(man ALL DEPENDS ${_ps_man_pages})
  install(FILES ${_ps_man_pages} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 COMPONENT pipestudio)
else()
  message(STATUS "packaging: no man pages (help2man not found, or a sanitizer or fuzzing build)")
endif()

# --- pipestudio-engine: its Debian package carries the same copyright and changelog.
if(TARGET pipestudio-engine)
  install(FILES ${_ps_doc_files} DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/pipestudio-engine COMPONENT engine)
  install(FILES ${PROJECT_SOURCE_DIR}/packaging/debian/pipestudio-engine.lintian-overrides
          DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides RENAME pipestudio-engine COMPONENT engine)
endif()
