//! CTF text held whole, parsed in pieces of whole sequences on every core and handed on in file
//! order ([`parse_ctf_pieces`]): the engine of CTF to CBF here, and of CTF to Parquet and Arrow
//! (`columnar`, the `arrow` feature).
//!
//! The sequence boundaries are found first ([`scan_sequences`]), and the text is cut into
//! pieces of about [`PIECE_BYTES`] at them. Without an error budget, worker threads (one per thread of rayon's pool) parse pieces and pass each
//! through the caller's `work` (encoding it, say), while the calling thread hands the results
//! to `consume` in file order, stopping at the first error in file order (after the sequences
//! complete before it): the results, and the error, are those of one parser going through the
//! pieces in order, which is what happens with an error budget (errors must be counted in file
//! order).

use crate::batch::SequenceBatch;
use crate::ctf::{detect_key_mode, scan_sequences, CtfOptions, CtfParser, KeyMode};
use crate::element::Element;
use crate::error::{Diagnostic, DiagnosticSink, Error, Result};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};

/// Bytes of CTF text parsed at a time (whole sequences; a longer sequence makes a longer piece).
/// About 1 MiB, as the CTF parse benchmark parses: the parsed values of a piece then stay in the
/// cache until they are encoded, and fewer bytes are in flight (measured: 1 MiB pieces took
/// less CPU time and fewer page faults than 4 MiB ones).
pub const PIECE_BYTES: usize = 1 << 20;

/// Bytes of CTF text in flight in the parallel pipeline (at least two pieces per worker).
const WINDOW_BYTES: usize = 32 << 20;

/// The last stage of [`PieceStages`]: takes a piece's `E` in file order.
pub type Consume<'a, E> = dyn FnMut(E, u64, &mut Vec<E>) -> Result<()> + 'a;

/// What the pieces of [`parse_ctf_pieces`] go through.
pub struct PieceStages<'a, T, E> {
    /// On the thread that parsed the piece: turns its sequences (`batch`, which it may take
    /// or leave; it is cleared before the next piece is parsed into it) into `E`, replacing what
    /// `E` held. An error stops the conversion when its piece's turn comes.
    pub work: &'a (dyn Fn(&mut SequenceBatch<T>, &mut E) -> Result<()> + Sync),
    /// A new, empty `E`, when no spare one is at hand.
    pub new: &'a (dyn Fn() -> E + Sync),
    /// On the calling thread, in file order: takes a piece's `E` and the byte offset where the
    /// piece ends; may push `E`s it is done with onto the spares (for their buffers).
    pub consume: &'a mut Consume<'a, E>,
}

/// Parses the whole CTF file held in `ctf` (named `file` in errors) as `opts` say, in pieces of
/// about `piece_bytes`, on every core when no error may be tolerated (see the module
/// documentation), passing each piece through `stages`. Tolerated
/// problems go to `sink`. Memory holds at most about 32 MiB of text's pieces in flight (two per
/// worker when pieces are larger), whatever the size of the file.
pub fn parse_ctf_pieces<T: Element, E: Send>(
    ctf: &[u8],
    file: &str,
    opts: &CtfOptions,
    piece_bytes: usize,
    sink: &mut dyn DiagnosticSink,
    stages: PieceStages<'_, T, E>,
) -> Result<()> {
    let mut parser = CtfParser::new(opts.clone())?;
    parser.set_file_name(file);
    let mode = detect_key_mode(ctf, opts.skip_sequence_ids).ok_or_else(|| parser.empty_file())?;
    let pieces = cut(ctf, file, opts, mode, piece_bytes)?;
    // Pieces parse independently (in parallel) when no error may be tolerated (the first one
    // in file order is fatal, as in a serial parse); otherwise the error budget needs one
    // parser over the whole file.
    if opts.max_errors > 0 || pieces.len() < 2 {
        let mut batch = SequenceBatch::<T>::new(&opts.inputs);
        let mut spares = Vec::new();
        for p in &pieces {
            batch.clear();
            let parsed = parser.parse_chunk(p.text(ctf), p.offset, p.line, mode, &mut batch, sink);
            // On an error, the sequences complete before it go on first.
            batch.discard_sequence();
            if parsed.is_ok() || !batch.is_empty() {
                let mut e = spares.pop().unwrap_or_else(stages.new);
                (stages.work)(&mut batch, &mut e)?;
                (stages.consume)(e, p.end as u64, &mut spares)?;
            }
            parsed?;
        }
        return Ok(());
    }
    in_parallel(ctf, file, opts, mode, &pieces, sink, stages)
}

/// A run of whole sequences: from byte `offset` (line `line`, 1-based) to byte `end`.
#[derive(Debug, Clone, Copy)]
struct Piece {
    offset: u64,
    line: u64,
    end: usize,
}

impl Piece {
    fn text<'a>(&self, ctf: &'a [u8]) -> &'a [u8] {
        &ctf[self.offset as usize..self.end]
    }

    fn len(&self) -> usize {
        self.end - self.offset as usize
    }
}

/// The pieces of `ctf`.
fn cut(
    ctf: &[u8],
    file: &str,
    opts: &CtfOptions,
    mode: KeyMode,
    piece_bytes: usize,
) -> Result<Vec<Piece>> {
    // Where each piece's first sequence begins: (byte offset, 1-based line).
    let mut starts: Vec<(u64, u64)> = Vec::new();
    scan_sequences(ctf, 0, 1, mode, |e| {
        e.check_size(&opts.limits)?;
        match starts.last() {
            None => starts.push((0, 1)),
            Some(&(start, _)) if e.offset - start >= piece_bytes as u64 => {
                starts.push((e.offset, e.line))
            }
            Some(_) => {}
        }
        Ok(())
    })
    .map_err(|e| e.resolve_in(ctf, 0, 1).in_file(file.to_string()))?;
    Ok(starts
        .iter()
        .enumerate()
        .map(|(i, &(offset, line))| Piece {
            offset,
            line,
            end: starts.get(i + 1).map_or(ctf.len(), |s| s.0 as usize),
        })
        .collect())
}

/// A bounded in-order pipeline: worker threads parse pieces and put them through `work` (a
/// window of pieces ahead of the consumer); this thread reports their diagnostics and hands
/// the results to `consume` in file order, stopping at the first error as the serial path
/// does, and returns spares to the workers for their buffers.
fn in_parallel<T: Element, E: Send>(
    ctf: &[u8],
    file: &str,
    opts: &CtfOptions,
    mode: KeyMode,
    pieces: &[Piece],
    sink: &mut dyn DiagnosticSink,
    stages: PieceStages<'_, T, E>,
) -> Result<()> {
    let PieceStages { work, new, consume } = stages;
    let workers = rayon::current_num_threads().clamp(1, pieces.len());
    // Pieces in flight (bounding memory): up to WINDOW_BYTES of text, enough that the workers
    // keep going while the consumer is busy with a whole chunk (32 MiB by default, about 18 MiB
    // of MNIST-like text), or two per worker when pieces are larger (sequences of many
    // megabytes) or cores many.
    let min_pieces = 2 * workers;
    let stop = AtomicBool::new(false);
    // A piece's result, its error (after its sequences complete before it), its diagnostics.
    type Done<E> = (Result<Option<E>>, Option<Error>, Vec<Diagnostic>);
    let (jobs_tx, jobs_rx) =
        crossbeam_channel::unbounded::<(usize, crossbeam_channel::Sender<Done<E>>)>();
    // Spares go back to the workers (bounded by the window and what the consumer holds).
    let (spares_tx, spares_rx) = crossbeam_channel::unbounded::<E>();
    std::thread::scope(|scope| -> Result<()> {
        for _ in 0..workers {
            let (jobs_rx, spares_rx, stop) = (jobs_rx.clone(), spares_rx.clone(), &stop);
            scope.spawn(move || {
                let mut batch = SequenceBatch::<T>::new(&opts.inputs);
                for (i, done) in jobs_rx {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let p = pieces[i];
                    let mut diags = Vec::new();
                    batch.clear();
                    let mut e = spares_rx.try_recv().unwrap_or_else(|_| new());
                    // A fresh parser per piece, as pieces are independent.
                    let parsed = CtfParser::new(opts.clone()).and_then(|mut parser| {
                        parser.set_file_name(file);
                        parser
                            .parse_chunk(
                                p.text(ctf),
                                p.offset,
                                p.line,
                                mode,
                                &mut batch,
                                &mut diags,
                            )
                            .map(drop)
                    });
                    batch.discard_sequence();
                    let error = parsed.err();
                    let r = if error.is_none() || !batch.is_empty() {
                        work(&mut batch, &mut e).map(|()| Some(e))
                    } else {
                        Ok(None)
                    };
                    // The consumer may have stopped and dropped the receiver.
                    let _ = done.send((r, error, diags));
                }
            });
        }
        drop((jobs_rx, spares_rx));
        let result = (|| {
            let mut queue = VecDeque::new();
            let (mut next, mut in_flight) = (0, 0);
            let mut spares = Vec::new();
            loop {
                while next < pieces.len()
                    && (queue.len() < min_pieces || in_flight + pieces[next].len() <= WINDOW_BYTES)
                {
                    let (tx, rx) = crossbeam_channel::bounded(1);
                    jobs_tx
                        .send((next, tx))
                        .map_err(|_| Error::config("conversion workers stopped"))?;
                    queue.push_back((rx, next));
                    in_flight += pieces[next].len();
                    next += 1;
                }
                let Some((rx, i)) = queue.pop_front() else {
                    return Ok(());
                };
                in_flight -= pieces[i].len();
                let (r, error, diags): Done<E> = rx
                    .recv()
                    .map_err(|_| Error::config("a conversion worker stopped"))?;
                for d in diags {
                    sink.report(d);
                }
                if let Some(e) = r? {
                    consume(e, pieces[i].end as u64, &mut spares)?;
                }
                if let Some(error) = error {
                    return Err(error);
                }
                for spare in spares.drain(..) {
                    let _ = spares_tx.send(spare);
                }
            }
        })();
        stop.store(true, Ordering::Relaxed);
        drop(jobs_tx);
        result
    })
}
