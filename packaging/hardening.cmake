# Compiler and linker flags of every PipeStudio build that is not a sanitizer or fuzzing build:
# Debian's hardening set (dpkg-buildflags with hardening=+all on amd64: stack protector, stack
# clash protection, control-flow protection, format checks, _FORTIFY_SOURCE, full RELRO with
# immediate binding; PIE is the compiler's default), and __FILE__ relative to the source and
# build trees, so that no path of the build machine ends up in an installed binary (libtorch's
# TORCH_CHECK and friends expand __FILE__ in the engine's code).
option(PIPESTUDIO_HARDENING "Build with Debian's hardening flags" ON)
if(PIPESTUDIO_FUZZ OR CMAKE_CXX_FLAGS MATCHES "-fsanitize")
  set(PIPESTUDIO_HARDENING OFF)  # the sanitizers bring their own checks; FORTIFY hides bugs from them
endif()
if(PIPESTUDIO_HARDENING)
  add_compile_options(
    "$<$<COMPILE_LANGUAGE:CXX>:-fstack-protector-strong;-fstack-clash-protection;-fcf-protection>"
    "$<$<COMPILE_LANGUAGE:CXX>:-Wformat;-Werror=format-security>"
    # _FORTIFY_SOURCE needs the optimizer (a -O0 build warns, which -Werror turns into an error).
    "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<NOT:$<CONFIG:Debug>>>:-D_FORTIFY_SOURCE=2>")
  add_link_options(LINKER:-z,relro LINKER:-z,now)
endif()
# The later map wins where both match (the build tree may lie inside the source tree).
add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-fmacro-prefix-map=${PROJECT_SOURCE_DIR}/=>"
                    "$<$<COMPILE_LANGUAGE:CXX>:-fmacro-prefix-map=${PROJECT_BINARY_DIR}/=>")
