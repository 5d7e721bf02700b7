//! Process-wide pools of reusable memory, and the rule that keeps a forked child away from them.
//!
//! A read buffer or batch that is new each time costs a page fault per 4 KiB the first time it is
//! written (the kernel zeroes each page, and a virtual machine's host backs it): on the
//! benchmark machine that was a quarter of the CBF reader's time. So chunk readers take their
//! buffers from [`take_read_buffer`] and give them back with [`give_back_read_buffer`]; the
//! reader keeps decoded batches in its own pool (`reader::pool`).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

/// Whether a process-wide pool whose first user's process id is in `owner` may be used here: a
/// process forked from that one (a PyTorch DataLoader worker) has a copy of the pool whose mutex
/// another thread of the parent may have held at the fork, and none of the parent's threads, so
/// it never touches the pool (it reads with fresh buffers instead).
pub(crate) fn owned_by_this_process(owner: &AtomicU32) -> bool {
    let me = std::process::id();
    match owner.compare_exchange(0, me, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => true,
        Err(first) => first == me,
    }
}

/// Read buffers for reuse, shared by every chunk reader of every file (CTF and CBF). One pool
/// for the process, not one per file: a corpus of thousands of shards keeps at most
/// [`KEPT_BUFFERS`] buffers and [`KEPT_BYTES`], not a chunk per shard.
static READ_BUFFERS: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());
/// The process [`READ_BUFFERS`] belongs to (see [`owned_by_this_process`]).
static READ_BUFFERS_OWNER: AtomicU32 = AtomicU32::new(0);
/// Buffers kept (about one per decoding thread).
const KEPT_BUFFERS: usize = 8;
/// Bytes kept at most (one buffer is kept whatever its size).
const KEPT_BYTES: usize = 64 << 20;

/// A read buffer of `len` bytes from the pool (a new one when there is none). Only bytes beyond
/// the buffer's earlier length are zeroed: a reused buffer still holds its last contents, which
/// the caller overwrites.
pub(crate) fn take_read_buffer(len: usize) -> Vec<u8> {
    let mut buf = if owned_by_this_process(&READ_BUFFERS_OWNER) {
        READ_BUFFERS
            .lock()
            .ok()
            .and_then(|mut b| b.pop())
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    if buf.len() < len {
        buf.resize(len, 0);
    }
    buf.truncate(len);
    buf
}

/// Puts `buf` back into the pool when it has room for it.
pub(crate) fn give_back_read_buffer(buf: Vec<u8>) {
    if buf.capacity() == 0 || !owned_by_this_process(&READ_BUFFERS_OWNER) {
        return;
    }
    if let Ok(mut b) = READ_BUFFERS.lock() {
        let kept: usize = b.iter().map(Vec::capacity).sum();
        if b.is_empty() || (b.len() < KEPT_BUFFERS && kept + buf.capacity() <= KEPT_BYTES) {
            b.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_has_the_length_asked_whether_new_or_reused() {
        for len in [1000, 10, 5000, 0, 4096] {
            let buf = take_read_buffer(len);
            assert_eq!(buf.len(), len);
            give_back_read_buffer(buf);
        }
    }
}
