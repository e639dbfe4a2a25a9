# PIPESTUDIO_FUZZ: every target (the libraries under test included) is built with libFuzzer's
# coverage instrumentation and the address and undefined-behaviour sanitizers; only the fuzz
# targets link libFuzzer's main. Needs clang (clang-14 and libclang-rt-14-dev on Debian 12).
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "PIPESTUDIO_FUZZ=ON needs clang++ (e.g. -DCMAKE_CXX_COMPILER=clang++-14)")
endif()
set(PIPESTUDIO_FUZZ_SANITIZERS "address,undefined" CACHE STRING "Sanitizers of the fuzz build")
add_compile_options(-fsanitize=fuzzer-no-link,${PIPESTUDIO_FUZZ_SANITIZERS} -fno-omit-frame-pointer
                    -fno-sanitize-recover=undefined)
add_link_options(-fsanitize=${PIPESTUDIO_FUZZ_SANITIZERS})
