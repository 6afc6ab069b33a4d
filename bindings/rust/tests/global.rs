//! MiMalloc as the global allocator of a test program: every allocation of
//! the tests below (and of the test harness) goes through it.

use mimalloc::MiMalloc;
use std::alloc::{alloc, alloc_zeroed, dealloc, realloc, Layout};
use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc;
use std::sync::{Arc, Barrier};
use std::thread;

#[global_allocator]
static GLOBAL: MiMalloc = MiMalloc;

fn ours<T: ?Sized>(r: &T) -> bool {
    mimalloc::is_in_heap_region(r as *const T as *const u8)
}

#[test]
fn collections_are_allocated_by_mimalloc() {
    let v: Vec<u64> = (0..10_000).collect();
    assert!(ours(&v[0]));
    let s = String::from("hello, mimalloc");
    assert!(ours(s.as_str()));
    let b = Box::new([1u8; 3000]);
    assert!(ours(&*b));
    let mut m = HashMap::new();
    for i in 0..1000 {
        m.insert(i, i.to_string());
    }
    assert!(ours(m.get(&500).unwrap().as_str()));
    assert_eq!(m[&999], "999");
}

#[test]
fn alignments_sizes_and_zeroing() {
    for &align in &[1usize, 2, 8, 16, 32, 64, 4096, 65536, 1 << 22] {
        for &size in &[1usize, 7, 16, 100, 4096, 100_000, 5 << 20] {
            let layout = Layout::from_size_align(size, align).unwrap();
            unsafe {
                let p = alloc(layout);
                assert!(!p.is_null(), "size {} align {}", size, align);
                assert_eq!(p as usize % align, 0, "size {} align {}", size, align);
                assert!(mimalloc::usable_size(p) >= size);
                p.write_bytes(0xAB, size);
                dealloc(p, layout);
                let z = alloc_zeroed(layout);
                assert!(!z.is_null());
                assert_eq!(z as usize % align, 0);
                assert!(std::slice::from_raw_parts(z, size).iter().all(|&x| x == 0), "size {} align {}", size, align);
                dealloc(z, layout);
            }
        }
    }
}

#[test]
fn realloc_keeps_contents_and_alignment() {
    unsafe {
        let layout = Layout::from_size_align(64, 64).unwrap();
        let mut p = alloc(layout);
        for i in 0..64 {
            *p.add(i) = i as u8;
        }
        let mut size = 64;
        for &new_size in &[100usize, 1000, 100_000, 10 << 20, 50, 10] {
            p = realloc(p, Layout::from_size_align(size, 64).unwrap(), new_size);
            assert!(!p.is_null());
            assert_eq!(p as usize % 64, 0);
            for i in 0..size.min(new_size).min(64) {
                assert_eq!(*p.add(i), i as u8);
            }
            size = new_size;
        }
        dealloc(p, Layout::from_size_align(size, 64).unwrap());
    }
}

// Many threads allocating through the global allocator, handing blocks to
// other threads to free, and ending while blocks they allocated live on.
#[test]
fn many_threads_allocate_and_free_each_others_blocks() {
    const THREADS: usize = 8;
    const ROUNDS: usize = 20;
    const ITEMS: usize = 2000;
    let barrier = Arc::new(Barrier::new(THREADS));
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..THREADS).map(|_| mpsc::channel::<Vec<Box<[u64]>>>()).unzip();
    let mut handles = Vec::new();
    for (id, rx) in receivers.into_iter().enumerate() {
        let next = senders[(id + 1) % THREADS].clone();
        let barrier = barrier.clone();
        handles.push(thread::spawn(move || {
            barrier.wait();
            let mut checked = 0usize;
            for round in 0..ROUNDS {
                // allocate mixed sizes tagged with (thread, round, index)
                let batch: Vec<Box<[u64]>> = (0..ITEMS)
                    .map(|i| {
                        let len = 1 + (i * 7 + round) % 300;
                        vec![((id * ROUNDS + round) * ITEMS + i) as u64; len].into_boxed_slice()
                    })
                    .collect();
                assert!(batch.iter().all(|b| mimalloc::is_in_heap_region(b.as_ptr() as *const u8)));
                next.send(batch).unwrap();
                // check and free the previous thread's batch
                let theirs = rx.recv().unwrap();
                let from = (id + THREADS - 1) % THREADS;
                for (i, b) in theirs.iter().enumerate() {
                    let tag = ((from * ROUNDS + round) * ITEMS + i) as u64;
                    assert!(b.iter().all(|&x| x == tag), "a block was handed out twice or overwritten");
                    checked += 1;
                }
                // some temporary churn in between
                let mut m = BTreeMap::new();
                for i in 0..500 {
                    m.insert(i, format!("{}-{}", id, i));
                }
                assert_eq!(m.len(), 500);
            }
            checked
        }));
    }
    drop(senders);
    let total: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(total, THREADS * ROUNDS * ITEMS);
}

#[test]
fn short_lived_threads_leave_their_blocks_to_others() {
    // blocks outlive the threads that allocated them
    let mut kept: Vec<String> = Vec::new();
    for round in 0..50 {
        let h = thread::spawn(move || (0..200).map(|i| format!("{}:{}", round, i)).collect::<Vec<String>>());
        kept.extend(h.join().unwrap());
    }
    assert_eq!(kept.len(), 50 * 200);
    assert_eq!(kept[200 * 49 + 199], "49:199");
    assert!(kept.iter().all(|s| ours(s.as_str())));
}
