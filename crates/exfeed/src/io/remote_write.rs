//! Writing an object to S3 (the `remote` feature) so that no partial object ever appears: a
//! multipart upload, completed only by [`RemoteOutput::finish`] once the output is whole, and
//! aborted on any error or when dropped unfinished. A process killed part-way never completes
//! its upload, so nothing appears under the name either (the store keeps the parts of an
//! incomplete upload out of sight until its lifecycle rules remove them).
//!
//! Each request (a part, the upload's start and completion) that fails transiently (5xx,
//! `503 SlowDown`, a reset connection, a timeout) is sent again by object_store, with backoff,
//! as many times as [`RemoteOptions::retry`](super::remote::RemoteOptions) allows; a part
//! that still fails, or fails permanently, aborts the upload.
//!
//! An existing object is refused unless `force` is set. object_store completes multipart
//! uploads unconditionally, so the check is a HEAD request when the write starts and another
//! just before it completes: an object that another writer puts in between those two moments
//! and the completion is replaced (a window of one request).

use super::remote::{Failure, Remote, RemoteOptions};
use crate::error::{Error, ErrorKind, Result};
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStoreExt, WriteMultipart};
use std::io::Write;
use std::sync::Arc;

/// The size of each part (S3 takes parts of 5 MiB and more, the last excepted).
const PART: usize = 8 << 20;
/// Parts uploaded at once.
const PARTS_IN_FLIGHT: usize = 4;

/// An object being written; see the module docs.
pub struct RemoteOutput {
    remote: Remote,
    path: ObjectPath,
    runtime: Arc<tokio::runtime::Runtime>,
    upload: Option<WriteMultipart>,
    force: bool,
}

impl std::fmt::Debug for RemoteOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteOutput")
            .field("url", &self.remote.url())
            .field("force", &self.force)
            .finish()
    }
}

impl RemoteOutput {
    /// Starts writing the object at `url` (`s3://bucket/key`); refused at once if it exists
    /// and `force` is not set.
    pub fn create(url: &str, options: &RemoteOptions, force: bool) -> Result<Self> {
        let remote = Remote::for_writing(url, options)?;
        if !remote.is_s3() {
            return Err(remote.error(
                None,
                ErrorKind::Config,
                "only s3:// URLs can be written (write the output to a local file and copy it \
                 to its place, e.g. with `gcloud storage cp`)",
            ));
        }
        let path = remote.path()?;
        let (store, runtime) = remote.client()?;
        let mut output = RemoteOutput {
            remote,
            path,
            runtime,
            upload: None,
            force,
        };
        output.refuse_existing()?;
        let upload = output
            .runtime
            .block_on(store.put_multipart(&output.path))
            .map_err(|e| output.failed("cannot start the upload", &e))?;
        output.upload = Some(WriteMultipart::new_with_chunk_size(upload, PART));
        Ok(output)
    }

    /// Uploads what is left and completes the upload: only now does the object appear, whole.
    pub fn finish(mut self) -> Result<()> {
        self.refuse_existing()?;
        let upload = self.upload.take().expect("taken only here and on drop");
        // finish() aborts the upload itself when a part fails.
        self.runtime
            .block_on(upload.finish())
            .map(drop)
            .map_err(|e| self.failed("the upload failed and was aborted", &e))
    }

    /// An error if the object exists and may not be replaced (`force` unset).
    fn refuse_existing(&self) -> Result<()> {
        if self.force {
            return Ok(());
        }
        let (store, _) = self.remote.client()?;
        match self.runtime.block_on(store.head(&self.path)) {
            Err(object_store::Error::NotFound { .. }) => Ok(()),
            Ok(_) => Err(self.remote.error(
                None,
                ErrorKind::Refused,
                "output exists; replace it with --force (overwrite=True in Python)",
            )),
            Err(e) => Err(self.failed("cannot tell whether the output exists", &e)),
        }
    }

    fn failed(&self, what: &str, error: &object_store::Error) -> Error {
        let said = match self.remote.classify(error, true) {
            Failure::Transient(said) | Failure::Permanent(said) | Failure::Replaced(said) => said,
        };
        self.remote
            .error(None, ErrorKind::Io, format!("{what}: {said}"))
    }

    /// Aborts the upload (on an error, or dropped unfinished).
    fn abort(&mut self) {
        if let Some(upload) = self.upload.take() {
            let _ = self.runtime.block_on(upload.abort());
        }
    }
}

impl Write for RemoteOutput {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let Some(upload) = self.upload.as_mut() else {
            return Err(std::io::Error::other("the upload was aborted"));
        };
        // Parts are started as tasks of the runtime; at most PARTS_IN_FLIGHT at once.
        let _context = self.runtime.enter();
        upload.write(buf);
        let waited = self
            .runtime
            .block_on(upload.wait_for_capacity(PARTS_IN_FLIGHT));
        if let Err(e) = waited {
            let error = self.failed("a part of the upload failed; the upload was aborted", &e);
            self.abort();
            return Err(error.into_io());
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for RemoteOutput {
    fn drop(&mut self) {
        self.abort();
    }
}

/// Uploads the local file `local` as the object at `url` (see [`RemoteOutput`]).
pub fn upload_file(
    local: &std::path::Path,
    url: &str,
    options: &RemoteOptions,
    force: bool,
) -> Result<()> {
    let mut output = RemoteOutput::create(url, options, force)?;
    let mut file = std::fs::File::open(local).map_err(|e| Error::io(local, e))?;
    std::io::copy(&mut file, &mut output).map_err(Error::from)?;
    output.finish()
}
