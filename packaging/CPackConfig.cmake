# `cpack -G DEB` (make package) from a build directory: two Debian packages,
#   pipestudio         the designer, pipestudio-cli, bundled schedules, profiles and examples,
#                      documentation, man pages, desktop entry, MIME type, AppStream data, icons
#   pipestudio-engine  pipestudio-engine in libexec/pipestudio, where the installed CLI looks for
#                      it; packaged apart because it brings libtorch (about 700 MB installed), and
#                      recommended by pipestudio, so apt installs it unless told not to
# (a build without libtorch packages pipestudio alone), and one TGZ of everything.
# tests/package/deb_test.sh checks them (ctest -L package); tests/package/clean_root_test.sh
# installs them into a fresh Debian root (make package-test-root). packaging/README.md says why
# each field is what it is.
include(${CMAKE_CURRENT_LIST_DIR}/install.cmake)

set(PS_DEBIAN_REVISION 1)  # the top entry of packaging/debian/changelog is PROJECT_VERSION-this
set(PS_PACKAGE_VERSION ${PROJECT_VERSION}-${PS_DEBIAN_REVISION})

set(CPACK_PACKAGE_NAME "pipestudio")
set(CPACK_PACKAGE_VENDOR "The PipeStudio developers")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
# pipestudio.example.org is a placeholder: the project has no public address yet (README.md).
set(CPACK_PACKAGE_CONTACT "PipeStudio maintainers <maintainers@pipestudio.example.org>")
set(CPACK_PACKAGE_HOMEPAGE_URL "https://pipestudio.example.org/")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_GENERATOR "DEB;TGZ")
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
set(CPACK_STRIP_FILES ON)
set(CPACK_COMPONENTS_ALL pipestudio)
if(TARGET pipestudio-engine)
  list(APPEND CPACK_COMPONENTS_ALL engine)
endif()
set(CPACK_ARCHIVE_COMPONENT_INSTALL OFF)  # one TGZ

set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_RELEASE ${PS_DEBIAN_REVISION})
set(CPACK_DEBIAN_PACKAGE_SECTION "science")  # where Debian files PyTorch
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)       # dpkg-shlibdeps: Qt 6, SQLite, libtorch, libstdc++
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

# Each description's first line is the package's synopsis (so CPACK_PACKAGE_DESCRIPTION_SUMMARY,
# which CPack would put before it, stays unset).
set(CPACK_DEBIAN_PIPESTUDIO_PACKAGE_NAME "pipestudio")
set(CPACK_DEBIAN_PIPESTUDIO_DESCRIPTION
    "designer and debugger for pipeline-parallel training schedules
PipeStudio designs the schedules of pipeline-parallel training: which device
runs which micro-batch's forward, backward and weight-gradient work, in
which order. It checks a schedule for dependency errors and deadlocks,
simulates it with a cost model of compute, links and memory, searches for
faster schedules, partitions and placements, reads and writes PyTorch
pipelining CSV files, and lays measured PyTorch profiler traces over the
plan.

This package contains the designer (pipestudio), the command line
(pipestudio-cli), the built-in schedules, cost profiles of common models,
examples and the documentation. Running a schedule on a real model and
profiling one need the libtorch engine, pipestudio-engine.")
if(TARGET pipestudio-engine)
  set(CPACK_DEBIAN_PIPESTUDIO_PACKAGE_RECOMMENDS "pipestudio-engine (= ${PS_PACKAGE_VERSION})")
endif()

set(CPACK_DEBIAN_ENGINE_PACKAGE_NAME "pipestudio-engine")
set(CPACK_DEBIAN_ENGINE_DESCRIPTION
    "libtorch engine of PipeStudio: runs and profiles schedules
pipestudio-engine runs PipeStudio's pipeline-parallel schedules on real
models through libtorch, on CPU threads or Gloo processes: built-in GPT and
MLP models or TorchScript models, with exact-gradient checks and measured
timelines, and measures a model's per-layer costs into a cost profile.
pipestudio-cli hands its run and profile commands to it.

It is a package of its own because libtorch is large; the designer and every
other command work without it.")
# Debian's libtorch falls back to the reference BLAS (about 50x slower) unless an optimized one is
# installed: it is loaded through the BLAS alternative, so no linker dependency names it.
set(CPACK_DEBIAN_ENGINE_PACKAGE_DEPENDS "pipestudio (= ${PS_PACKAGE_VERSION}), libopenblas0-pthread")
include(CPack)
