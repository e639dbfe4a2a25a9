# `cpack -G DEB` (or TGZ) from a build directory packages pipestudio, pipestudio-cli and
# pipestudio-engine (in libexec/pipestudio, where the installed CLI looks for it), the desktop
# entry, AppStream data, icon, and the bundled examples, schedules and profiles.
# tests/package/deb_test.sh builds the package and runs the unpacked CLI (ctest -L package).
set(CPACK_PACKAGE_NAME "pipestudio")
set(CPACK_PACKAGE_VENDOR "PipeStudio")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "Designer and debugger for pipeline-parallel training schedules")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "PipeStudio maintainers")
set(CPACK_GENERATOR "DEB;TGZ")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# dpkg-shlibdeps adds the linked libraries (Qt 6, SQLite, libtorch1.13) to these. Debian's
# libtorch falls back to the reference BLAS (about 50x slower) unless an optimized one is
# installed: it is loaded through the BLAS alternative, so no linker dependency names it.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libopenblas0-pthread")
set(CPACK_DEBIAN_PACKAGE_SECTION "devel")
install(FILES ${CMAKE_CURRENT_LIST_DIR}/pipestudio.desktop DESTINATION share/applications)
install(FILES ${CMAKE_CURRENT_LIST_DIR}/io.pipestudio.PipeStudio.metainfo.xml DESTINATION share/metainfo)
install(FILES ${CMAKE_CURRENT_SOURCE_DIR}/resources/icons/pipestudio.svg
        DESTINATION share/icons/hicolor/scalable/apps OPTIONAL)
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/resources/schedules ${CMAKE_CURRENT_SOURCE_DIR}/resources/profiles
        DESTINATION share/pipestudio OPTIONAL)
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/resources/examples DESTINATION share/pipestudio
        PATTERN "*.sh" EXCLUDE)
include(CPack)
