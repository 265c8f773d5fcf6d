# Every third-party library gputriage uses, behind one target each: dep::<name>.
#
# Two ways to link them:
#  - shared (the default: the sanitizer, debug and fuzz trees), Debian's shared
#    libraries as found on this machine;
#  - static (GPUTRIAGE_PORTABLE: the release tree and the wheel), every
#    library from a static archive, so that the binary and the Python extension
#    take nothing from the host but glibc (and the NVIDIA driver's libnvidia-ml,
#    loaded at run time). Debian 12 ships most archives; simdjson, fmt and ISA-L
#    are built from Debian's source packages into GPUTRIAGE_DEPS_DIR/lib by
#    scripts/portable_deps.sh, and libpq is loaded at run time
#    (src/store/libpq_library.cc). docs/packaging.md says why for each.
# Only the products (the CLI, the Python extension) are then linked against
# glibc 2.31 (gputriage_portable_link below); tests and benchmarks link as usual.

option(GPUTRIAGE_PORTABLE "Static dependencies; the CLI and the Python extension linked against glibc 2.31 (the release preset, the wheel)" OFF)
set(GPUTRIAGE_DEPS_DIR "${PROJECT_SOURCE_DIR}/build/deps/${CMAKE_SYSTEM_PROCESSOR}" CACHE PATH
    "The portable build's glibc 2.31 and static archives (made by scripts/portable_deps.sh)")
set(GPUTRIAGE_STATIC_DEPS OFF)
if(GPUTRIAGE_PORTABLE)
  if(NOT EXISTS ${GPUTRIAGE_DEPS_DIR}/.complete)
    message(FATAL_ERROR "GPUTRIAGE_DEPS_DIR=${GPUTRIAGE_DEPS_DIR} is not ready: run "
                        "scripts/portable_deps.sh (scripts/bootstrap.sh does) first")
  endif()
  set(GPUTRIAGE_STATIC_DEPS ON)
endif()

find_package(PkgConfig REQUIRED)
find_package(ZLIB REQUIRED)
find_package(fmt REQUIRED)
find_package(simdjson REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(SQLite3 REQUIRED)
find_package(OpenSSL REQUIRED)
find_package(Protobuf REQUIRED)
find_package(Threads REQUIRED)
find_program(GRPC_CPP_PLUGIN grpc_cpp_plugin REQUIRED)

# glibc's own libraries stay shared: they are the one thing taken from the host.
set(gputriage_glibc_libraries c m dl pthread rt)

# The static archive for -l<name>: GPUTRIAGE_DEPS_DIR/lib first, then the
# package's own directories, then the compiler's (libatomic). Fails the
# configuration when there is none: a shared library must not slip in.
function(gputriage_static_archive out name)
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=lib${name}.a OUTPUT_VARIABLE compiler_copy
                  OUTPUT_STRIP_TRAILING_WHITESPACE)
  find_file(archive_${name} lib${name}.a NO_DEFAULT_PATH NO_CACHE NO_CMAKE_FIND_ROOT_PATH
            PATHS ${GPUTRIAGE_DEPS_DIR}/lib ${ARGN} ${CMAKE_FIND_ROOT_PATH}/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}
                  /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE})
  if(NOT archive_${name} AND IS_ABSOLUTE "${compiler_copy}" AND EXISTS "${compiler_copy}")
    set(archive_${name} ${compiler_copy})
  endif()
  if(NOT archive_${name})
    message(FATAL_ERROR "The portable build needs lib${name}.a and there is none (looked in "
                        "${GPUTRIAGE_DEPS_DIR}/lib ${ARGN} /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE})")
  endif()
  set(${out} ${archive_${name}} PARENT_SCOPE)
endfunction()

# dep::<name> from a pkg-config module: its shared libraries, or with static
# dependencies each library of `pkg-config --static --libs` as its archive.
function(gputriage_pkg_dependency name module)
  string(TOUPPER "GPUTRIAGE_PC_${name}" prefix)
  pkg_check_modules(${prefix} REQUIRED IMPORTED_TARGET ${module})
  add_library(gputriage_dep_${name} INTERFACE)
  add_library(dep::${name} ALIAS gputriage_dep_${name})
  if(NOT GPUTRIAGE_STATIC_DEPS)
    target_link_libraries(gputriage_dep_${name} INTERFACE PkgConfig::${prefix})
    return()
  endif()
  target_include_directories(gputriage_dep_${name} SYSTEM INTERFACE ${${prefix}_STATIC_INCLUDE_DIRS})
  target_compile_options(gputriage_dep_${name} INTERFACE ${${prefix}_STATIC_CFLAGS_OTHER})
  set(archives)
  set(system)
  foreach(lib IN LISTS ${prefix}_STATIC_LIBRARIES)
    if(lib IN_LIST gputriage_glibc_libraries)
      list(APPEND system ${lib})
    elseif(NOT lib IN_LIST archives_seen)
      list(APPEND archives_seen ${lib})
      gputriage_static_archive(archive ${lib} ${${prefix}_STATIC_LIBRARY_DIRS})
      list(APPEND archives ${archive})
    endif()
  endforeach()
  list(REMOVE_DUPLICATES system)
  # Archives that refer to each other (gRPC, Abseil) resolve in one group.
  target_link_libraries(gputriage_dep_${name} INTERFACE "$<LINK_GROUP:RESCAN,${archives}>" ${system} Threads::Threads)
endfunction()

# dep::<name> from a CMake package's imported target: the target itself, or
# its headers with the archive libNAME.a.
function(gputriage_cmake_dependency name imported archive_name)
  add_library(gputriage_dep_${name} INTERFACE)
  add_library(dep::${name} ALIAS gputriage_dep_${name})
  if(NOT GPUTRIAGE_STATIC_DEPS OR archive_name STREQUAL "")
    target_link_libraries(gputriage_dep_${name} INTERFACE ${imported})
    return()
  endif()
  get_target_property(includes ${imported} INTERFACE_INCLUDE_DIRECTORIES)
  target_include_directories(gputriage_dep_${name} SYSTEM INTERFACE ${includes})
  gputriage_static_archive(archive ${archive_name})
  target_link_libraries(gputriage_dep_${name} INTERFACE ${archive} ${ARGN})
endfunction()

gputriage_pkg_dependency(isal libisal)          # gzip traces through igzip
gputriage_pkg_dependency(zstd libzstd)
gputriage_pkg_dependency(yaml yaml-0.1)         # the agent's web config
gputriage_pkg_dependency(crypt libxcrypt)       # its bcrypt passwords
gputriage_pkg_dependency(ncursesw ncursesw)     # `top`
gputriage_pkg_dependency(grpcpp grpc++)         # the kubelet's pod-resources API
gputriage_pkg_dependency(openssl openssl)       # TLS: the HTTP client and the agent's server
gputriage_pkg_dependency(zlib zlib)
gputriage_pkg_dependency(sqlite3 sqlite3)       # the run store
gputriage_cmake_dependency(fmt fmt::fmt fmt)
gputriage_cmake_dependency(simdjson simdjson::simdjson simdjson)
# (its archive needs zlib's: dep::zlib is static where protobuf is)
gputriage_cmake_dependency(protobuf protobuf::libprotobuf protobuf dep::zlib Threads::Threads)
gputriage_cmake_dependency(json nlohmann_json::nlohmann_json "")
gputriage_cmake_dependency(cli11 CLI11::CLI11 "")
# PostgreSQL: only its headers at build time; libpq is loaded when a postgres://
# store is used (src/store/libpq_library.cc), so no build depends on its
# Kerberos and LDAP libraries, which Debian ships only as shared objects.
pkg_check_modules(GPUTRIAGE_PC_LIBPQ REQUIRED IMPORTED_TARGET libpq)  # (the tests call it directly)
add_library(gputriage_dep_libpq_headers INTERFACE)
add_library(dep::libpq_headers ALIAS gputriage_dep_libpq_headers)
target_include_directories(gputriage_dep_libpq_headers SYSTEM INTERFACE ${GPUTRIAGE_PC_LIBPQ_INCLUDE_DIRS})

# The products in the static build: linked against glibc 2.31 (Debian 11's,
# unpacked under GPUTRIAGE_DEPS_DIR/glibc-2.31) with libstdc++ inside, and held to
# glibc 2.28's symbols, so they run on any Linux whose glibc is 2.28 or newer
# (manylinux_2_28). The code is compiled against this machine's newer glibc
# headers; the few symbols those (and Debian 12's archives) take from glibc
# 2.29-2.36 are defined, or bound to their first versions, in
# src/portable/glibc_compat.cc; the link fails on any other newer than 2.31, and
# scripts/glibc_floor_check.sh after it on any newer than 2.28.
function(gputriage_portable_link target)
  if(NOT GPUTRIAGE_STATIC_DEPS)
    return()
  endif()
  set(glibc ${GPUTRIAGE_DEPS_DIR}/glibc-2.31)
  set(libdir ${glibc}/usr/lib/${CMAKE_LIBRARY_ARCHITECTURE})
  # libgcc_s stays shared (manylinux allows it): Debian 12's, and its static
  # libgcc_eh, call glibc 2.35's _dl_find_object, so the link takes Debian 11's
  # (unpacked beside glibc). -pthread: before 2.34 the threads live in libpthread.
  # --exclude-libs: what the archives define (libstdc++ above all) stays
  # inside; the Python extension, loaded beside PyTorch's libstdc++, exports
  # only PyInit__markers and binds its own references to its own copy.
  target_link_options(${target} PRIVATE -static-libstdc++ -pthread --sysroot=${glibc} -B${libdir}/
                      -L${libdir} -L${glibc}/lib/${CMAKE_LIBRARY_ARCHITECTURE} -Wl,--exclude-libs,ALL
                      # glibc 2.29's new versions of these: their first ones instead (glibc_compat.cc).
                      -Wl,--wrap=exp,--wrap=exp2,--wrap=log,--wrap=log2,--wrap=pow)
  target_link_libraries(${target} PRIVATE gputriage_glibc_compat)
  add_custom_command(TARGET ${target} POST_BUILD
                     COMMAND bash ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/../scripts/glibc_floor_check.sh $<TARGET_FILE:${target}> 28
                     VERBATIM)
endfunction()
