# Where an installed PipeStudio keeps its files, and the same layout in the build tree.
#
# Installed programs find their data relative to their own path (bin/../share/pipestudio), never
# through a path of the build machine: nothing absolute from the source or build tree is compiled
# into an installed program. The build tree mirrors the installed layout with symbolic links to the
# source's resources/ and docs/ (ps_mirror_install_layout), so a program run from the build tree
# finds its data by the same relative lookup as an installed one.
include(GNUInstallDirs)
set(PS_INSTALL_DATADIR ${CMAKE_INSTALL_DATADIR}/pipestudio)       # examples, schedules, profiles
set(PS_INSTALL_DOCDIR ${CMAKE_INSTALL_DATADIR}/doc/pipestudio)    # docs/*.md (Help › Documentation)
set(PS_INSTALL_ENGINEDIR ${CMAKE_INSTALL_LIBEXECDIR}/pipestudio)  # pipestudio-engine
foreach(_ps_dir DATADIR DOCDIR ENGINEDIR)
  file(RELATIVE_PATH PS_${_ps_dir}_FROM_BINDIR ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR}
       ${CMAKE_INSTALL_PREFIX}/${PS_INSTALL_${_ps_dir}})
endforeach()

# Folders the install creates are 0755 whatever the umask (Debian packages want them so).
set(CMAKE_INSTALL_DEFAULT_DIRECTORY_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
    WORLD_READ WORLD_EXECUTE)
# Install rules without a component belong to the main package (packaging/install.cmake).
set(CMAKE_INSTALL_DEFAULT_COMPONENT_NAME pipestudio)

# The package that holds pipestudio-engine, named by the CLI when the engine is missing.
set(PIPESTUDIO_ENGINE_PACKAGE "pipestudio-engine" CACHE STRING
    "Package that installs pipestudio-engine, named in the CLI's message when it is missing")

# Links DIR/<data dir> and DIR/<doc dir>, relative to a build-tree directory of executables DIR as
# the installed ones are to bin/, to the source's resources/ and docs/.
function(ps_mirror_install_layout dir)
  foreach(_pair "${PS_DATADIR_FROM_BINDIR}=resources" "${PS_DOCDIR_FROM_BINDIR}=docs")
    string(REPLACE "=" ";" _pair "${_pair}")
    list(GET _pair 0 _rel)
    list(GET _pair 1 _source)
    get_filename_component(_link "${dir}/${_rel}" ABSOLUTE)
    get_filename_component(_parent "${_link}" DIRECTORY)
    file(MAKE_DIRECTORY "${_parent}")
    file(CREATE_LINK "${PROJECT_SOURCE_DIR}/${_source}" "${_link}" SYMBOLIC)
  endforeach()
endfunction()
