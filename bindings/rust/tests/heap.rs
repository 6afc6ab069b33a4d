//! Heaps, heap boxes, statistics and the C API wrappers (with the system
//! allocator as the global allocator: only what goes through the wrappers is
//! mimalloc's).

use mimalloc::{stats, Heap, HeapBox, Opt};
use std::alloc::Layout;
use std::thread;

#[test]
fn heap_allocates_and_knows_its_blocks() {
    let heap = Heap::new();
    let other = Heap::new();
    let layout = Layout::from_size_align(1000, 64).unwrap();
    let p = heap.alloc(layout);
    assert!(!p.is_null());
    assert_eq!(p as usize % 64, 0);
    assert!(heap.contains(p));
    assert!(!other.contains(p));
    assert!(heap.check_owned(p));
    let z = heap.alloc_zeroed(Layout::from_size_align(5000, 8).unwrap());
    assert!(unsafe { std::slice::from_raw_parts(z, 5000) }.iter().all(|&b| b == 0));
    let q = unsafe { heap.realloc(p, layout, 100_000) };
    assert!(!q.is_null());
    assert!(heap.contains(q));
    assert_eq!(heap.live_blocks().0, 2);
    unsafe {
        mimalloc::free(q);
        mimalloc::free(z);
    }
    assert_eq!(heap.live_blocks(), (0, 0));
}

#[test]
fn boxes_live_in_their_heap_and_outlive_it() {
    let heap = Heap::new();
    let mut b: HeapBox<[u64; 64]> = heap.boxed([3u64; 64]);
    b[10] = 10;
    assert!(heap.contains(b.as_ptr() as *const u8));
    let s = heap.boxed(String::from("a string in a heap box"));
    let (count, bytes) = heap.live_blocks();
    assert_eq!(count, 2);
    assert!(bytes >= 64 * 8 + std::mem::size_of::<String>());
    let z = heap.boxed(()); // zero-sized: no block
    drop(z);
    drop(heap); // mi_heap_delete: the blocks move to the default heap
    assert_eq!(b[10], 10);
    assert_eq!(b[11], 3);
    assert_eq!(*s, "a string in a heap box");
    assert!(mimalloc::is_in_heap_region(b.as_ptr() as *const u8));
}

#[test]
fn boxes_are_dropped_by_other_threads() {
    let heap = Heap::new();
    let boxes: Vec<HeapBox<Vec<u32>>> = (0..100).map(|i| heap.boxed(vec![i; 10])).collect();
    assert_eq!(heap.live_blocks().0, 100);
    let sum = thread::spawn(move || boxes.iter().map(|b| b.iter().sum::<u32>()).sum::<u32>()).join().unwrap();
    assert_eq!(sum, (0..100).map(|i| i * 10).sum::<u32>());
    heap.collect(true);
    assert_eq!(heap.live_blocks().0, 0, "freed by the other thread, taken back by the owner");
}

#[test]
fn destroy_frees_every_block_at_once() {
    let heap = Heap::new();
    for i in 0..1000 {
        let p = heap.alloc(Layout::from_size_align(16 + i % 500, 8).unwrap());
        assert!(!p.is_null());
    }
    let huge = heap.alloc(Layout::from_size_align(8 << 20, 8).unwrap());
    assert!(heap.contains(huge));
    assert_eq!(heap.live_blocks().0, 1001);
    unsafe { heap.destroy() };
}

#[test]
fn statistics_table_and_process_info() {
    let heap = Heap::new();
    let _b = heap.boxed([0u8; 100_000]);
    let table = stats::to_string();
    assert!(table.starts_with("heap stats:"), "{}", table);
    assert!(table.contains("\n  reserved:"), "{}", table);
    assert!(table.contains("\n   process: user: "), "{}", table);
    assert!(stats::thread_to_string().contains("heap stats:"));
    let info = stats::process_info();
    assert!(info.current_rss > 0);
    assert!(info.peak_rss >= info.current_rss);
    assert!(info.peak_commit >= info.current_commit);
    stats::merge();
    stats::reset();
}

#[test]
fn api_functions() {
    assert_eq!(mimalloc::version() / 10, 16);
    assert!(mimalloc::good_size(10) >= 10);
    let local = 5u8;
    assert!(!mimalloc::is_in_heap_region(&local));
    mimalloc::collect(true);
    assert_eq!(mimalloc::option_get(Opt::OsTag), 100);
    let old = mimalloc::option_get(Opt::ResetDelay);
    mimalloc::option_set(Opt::ResetDelay, 250);
    assert_eq!(mimalloc::option_get(Opt::ResetDelay), 250);
    mimalloc::option_set(Opt::ResetDelay, old);
    assert_eq!(mimalloc::option_get(Opt::MaxErrors), 16);
}
