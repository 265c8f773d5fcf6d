# Cross-compiling the wheel's aarch64 binaries on an x86_64 Debian 12 machine
# (scripts/build_wheel.sh aarch64): Debian's cross gcc 12, and Debian 12's arm64
# -dev packages unpacked under build/deps/aarch64/root by scripts/portable_deps.sh
# (headers, static archives, pkg-config files). glibc's headers are the cross
# toolchain's own (2.36); the products link against Debian 11's arm64 glibc
# 2.31, as on x86_64 (cmake/dependencies.cmake).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
get_filename_component(gputriage_arm64_root "${CMAKE_CURRENT_LIST_DIR}/../../build/deps/aarch64/root" ABSOLUTE)
set(CMAKE_FIND_ROOT_PATH ${gputriage_arm64_root})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)  # protoc, grpc_cpp_plugin, node: this machine's
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(ENV{PKG_CONFIG_SYSROOT_DIR} ${gputriage_arm64_root})
set(ENV{PKG_CONFIG_LIBDIR} "${gputriage_arm64_root}/usr/lib/aarch64-linux-gnu/pkgconfig:${gputriage_arm64_root}/usr/share/pkgconfig")
# The extension's headers: Debian 12's arm64 CPython (its pyconfig.h is per architecture).
set(GPUTRIAGE_PYTHON_INCLUDE_DIRS "${gputriage_arm64_root}/usr/include/python3.11;${gputriage_arm64_root}/usr/include"
    CACHE STRING "")
# The packages' per-architecture headers (openssl/opensslconf.h, ...): where a
# native build's compiler looks by itself (/usr/include/<triplet>).
set(CMAKE_C_FLAGS_INIT "-isystem ${gputriage_arm64_root}/usr/include/aarch64-linux-gnu")
set(CMAKE_CXX_FLAGS_INIT "-isystem ${gputriage_arm64_root}/usr/include/aarch64-linux-gnu")
