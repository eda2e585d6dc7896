// Links fastclock's static library, as a Rust program would through FFI:
// its calls are direct, like those of the statically linked `fastclock bench`.
fn main() {
    let dir = std::env::var("FASTCLOCK_LIB_DIR")
        .expect("FASTCLOCK_LIB_DIR: the directory of libfastclock.a (make bench-peers sets it)");
    println!("cargo:rustc-link-search=native={dir}");
    println!("cargo:rustc-link-lib=static=fastclock");
    println!("cargo:rerun-if-env-changed=FASTCLOCK_LIB_DIR");
    println!("cargo:rerun-if-changed={dir}/libfastclock.a");
}
