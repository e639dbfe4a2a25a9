# `cpack -G DEB` (or TGZ) from a build directory packages pipestudio and pipestudio-cli.
set(CPACK_PACKAGE_NAME "pipestudio")
set(CPACK_PACKAGE_VENDOR "PipeStudio")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Designer and debugger for pipeline-parallel training schedules")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "PipeStudio maintainers")
set(CPACK_GENERATOR "DEB;TGZ")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION "devel")
install(FILES ${CMAKE_CURRENT_LIST_DIR}/pipestudio.desktop DESTINATION share/applications)
install(FILES ${CMAKE_CURRENT_LIST_DIR}/io.pipestudio.PipeStudio.metainfo.xml DESTINATION share/metainfo)
install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/resources/icons/pipestudio.svg
        DESTINATION share/icons/hicolor/scalable/apps OPTIONAL)
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/resources/schedules ${CMAKE_CURRENT_SOURCE_DIR}/resources/profiles
        DESTINATION share/pipestudio OPTIONAL)
include(CPack)
