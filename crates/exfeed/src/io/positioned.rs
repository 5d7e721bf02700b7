//! Positioned reads (`pread`): bytes at an offset of a file, without moving a shared cursor,
//! so several threads can read one file at once. Used by the CBF reader's buffered fallback and
//! the CTF chunk reader and indexer. Portable: Unix `read_at`, Windows `seek_read`.

use std::fs::File;
use std::io::{Error, ErrorKind, Result};

/// One read of up to `buf.len()` bytes at `offset`; the count read (0 at the end of the file).
pub fn read_at(file: &File, buf: &mut [u8], offset: u64) -> Result<usize> {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileExt::read_at(file, buf, offset)
    }
    #[cfg(windows)]
    {
        std::os::windows::fs::FileExt::seek_read(file, buf, offset)
    }
    #[cfg(not(any(unix, windows)))]
    {
        let _ = (file, buf, offset);
        Err(Error::new(
            ErrorKind::Unsupported,
            "positioned reads are not supported on this platform",
        ))
    }
}

/// Reads at `offset` until `buf` is full or the file ends; the count read.
pub fn read_at_most(file: &File, buf: &mut [u8], offset: u64) -> Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match read_at(file, &mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Reads exactly `buf.len()` bytes at `offset`; an [`ErrorKind::UnexpectedEof`] error when the
/// file ends first.
pub fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> Result<()> {
    if read_at_most(file, buf, offset)? < buf.len() {
        return Err(Error::new(
            ErrorKind::UnexpectedEof,
            format!("the file ends before byte {}", offset + buf.len() as u64),
        ));
    }
    Ok(())
}

/// Advice for a file read at offsets: no read-ahead beyond what each read asks for
/// (`POSIX_FADV_RANDOM`), so reading one worker's byte ranges of a file reads nothing of the
/// others'. Advice only: ignored where it is not supported.
pub(crate) fn advise_random(file: &File) {
    fadvise(file, 0, 0, Advice::Random);
}

/// Advice that bytes `offset..offset + len` of `file` will be read soon
/// (`POSIX_FADV_WILLNEED`): the kernel starts reading them into the page cache, in large
/// requests, and returns, so the reads (or page faults) that follow find them there or in
/// flight. Given in steps of [`WILL_NEED_STEP`]: advised in one step, a 32 MiB range mapped and
/// faulted in made the kernel read 12 MiB past its end (Linux 6.x); in steps of 1 or 4 MiB,
/// exactly the range.
pub(crate) fn advise_will_need(file: &File, offset: u64, len: u64) {
    let end = offset.saturating_add(len);
    let mut at = offset;
    while at < end {
        let step = (end - at).min(WILL_NEED_STEP);
        fadvise(file, at, step, Advice::WillNeed);
        at += step;
    }
}

/// Bytes advised at a time by [`advise_will_need`].
const WILL_NEED_STEP: u64 = 2 << 20;

enum Advice {
    Random,
    WillNeed,
}

fn fadvise(file: &File, offset: u64, len: u64, advice: Advice) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        let advice = match advice {
            Advice::Random => libc::POSIX_FADV_RANDOM,
            Advice::WillNeed => libc::POSIX_FADV_WILLNEED,
        };
        let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
            return;
        };
        // SAFETY: advice about an open file descriptor; it changes no data.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), offset, len, advice) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (file, offset, len, advice);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_at_offsets_and_reports_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"0123456789").unwrap();
        let f = File::open(&p).unwrap();
        let mut buf = [0u8; 4];
        read_exact_at(&f, &mut buf, 3).unwrap();
        assert_eq!(&buf, b"3456");
        assert_eq!(read_at_most(&f, &mut buf, 8).unwrap(), 2);
        let e = read_exact_at(&f, &mut buf, 8).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnexpectedEof);
        assert_eq!(e.to_string(), "the file ends before byte 12");
    }
}
