//! Builds the C library of this repository (src/static.c, the whole library
//! as one translation unit) into a static archive linked into the crate. No
//! symbol override: the C library's malloc stays the system's, and Rust
//! allocates through `MiMalloc` when it is the global allocator.

use std::env;
use std::path::PathBuf;

fn main() {
    let crate_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let root = crate_dir.join("..").join("..");
    let src = root.join("src");
    let include = root.join("include");
    if !src.join("static.c").exists() {
        panic!("mimalloc C sources not found at {}: build this crate inside its repository", src.display());
    }

    let mut build = cc::Build::new();
    build.file(src.join("static.c")).include(&include).include(&src);
    if env::var_os("CARGO_FEATURE_DEBUG").is_some() {
        build.define("MI_DEBUG", "3");
    } else {
        build.define("NDEBUG", None);
    }
    // the same code generation flags as the CMake build (CMakeLists.txt)
    build.flag_if_supported("-fvisibility=hidden");
    build.flag_if_supported("-fno-semantic-interposition");
    build.flag_if_supported("-Wno-unknown-pragmas");
    build.flag_if_supported("-Wno-invalid-memory-model");
    if env::var_os("CARGO_FEATURE_LOCAL_DYNAMIC_TLS").is_some() {
        build.flag_if_supported("-ftls-model=local-dynamic");
    } else {
        build.flag_if_supported("-ftls-model=initial-exec");
    }
    build.flag("-std=gnu11");
    build.compile("mimalloc");

    if env::var("CARGO_CFG_TARGET_OS").map(|os| os != "macos").unwrap_or(true) {
        println!("cargo:rustc-link-lib=pthread");
    }
    if env::var("CARGO_CFG_TARGET_OS").map(|os| os == "linux").unwrap_or(false) {
        println!("cargo:rustc-link-lib=dl");   // dladdr1 (the heap profiler); in libc itself since glibc 2.34
    }
    println!("cargo:include={}", include.display());
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-changed={}", include.display());
    println!("cargo:rerun-if-changed=build.rs");
}
