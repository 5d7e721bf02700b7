//! The reader and its minibatch in either precision. (To be replaced by the library's
//! `exfeed::reader::AnyReader` once it lands.)

use exfeed::config::ReaderConfig;
use exfeed::reader::{
    open_configured_source, ConfiguredSource, Minibatch, Reader, ReaderOptions, ReaderState,
};
use exfeed::{Element, Precision, Result, StreamSpec};

/// A minibatch of either precision.
pub enum AnyMinibatch {
    F32(Minibatch<f32>),
    F64(Minibatch<f64>),
}

macro_rules! either {
    ($value:expr, $x:ident => $body:expr) => {
        match $value {
            AnyMinibatch::F32($x) => $body,
            AnyMinibatch::F64($x) => $body,
        }
    };
}
pub(crate) use either;

#[allow(dead_code)] // the sources are kept open for the reader
enum Typed {
    F32(Reader<f32>, ConfiguredSource<f32>),
    F64(Reader<f64>, ConfiguredSource<f64>),
}

/// The reader of a configuration, of the precision it says.
pub struct AnyReader {
    typed: Typed,
}

impl AnyReader {
    pub fn open(
        cfg: &ReaderConfig,
        options: ReaderOptions,
        state: Option<&ReaderState>,
    ) -> Result<Self> {
        fn typed<T: Element>(
            cfg: &ReaderConfig,
            options: ReaderOptions,
            state: Option<&ReaderState>,
        ) -> Result<(Reader<T>, ConfiguredSource<T>)> {
            let source = open_configured_source::<T>(cfg)?;
            let reader = match state {
                Some(s) => Reader::restore(source.source.clone(), options, s)?,
                None => Reader::new(source.source.clone(), options)?,
            };
            Ok((reader, source))
        }
        let typed = match cfg.precision {
            Precision::Float => typed(cfg, options, state).map(|(r, s)| Typed::F32(r, s)),
            Precision::Double => typed(cfg, options, state).map(|(r, s)| Typed::F64(r, s)),
        }?;
        Ok(AnyReader { typed })
    }

    pub fn precision(&self) -> Precision {
        match self.typed {
            Typed::F32(..) => Precision::Float,
            Typed::F64(..) => Precision::Double,
        }
    }

    pub fn streams(&self) -> &[StreamSpec] {
        match &self.typed {
            Typed::F32(r, _) => r.streams(),
            Typed::F64(r, _) => r.streams(),
        }
    }

    pub fn new_minibatch(&self) -> AnyMinibatch {
        match &self.typed {
            Typed::F32(r, _) => AnyMinibatch::F32(r.new_minibatch()),
            Typed::F64(r, _) => AnyMinibatch::F64(r.new_minibatch()),
        }
    }

    pub fn next_minibatch(&mut self, size: usize, mb: &mut AnyMinibatch) -> Result<bool> {
        match (&mut self.typed, mb) {
            (Typed::F32(r, _), AnyMinibatch::F32(m)) => r.next_minibatch(size, m),
            (Typed::F64(r, _), AnyMinibatch::F64(m)) => r.next_minibatch(size, m),
            _ => unreachable!("a minibatch of the reader's precision"),
        }
    }

    pub fn state(&self) -> ReaderState {
        match &self.typed {
            Typed::F32(r, _) => r.state(),
            Typed::F64(r, _) => r.state(),
        }
    }

    pub fn is_done(&self) -> bool {
        match &self.typed {
            Typed::F32(r, _) => r.is_done(),
            Typed::F64(r, _) => r.is_done(),
        }
    }
}
