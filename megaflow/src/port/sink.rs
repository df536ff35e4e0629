//! [`Sink`]: the buffered output of a capture writer, which stops at its
//! first I/O error (the file may end with a partial record) and reports it
//! again on every later call.

use std::io::{self, Write};

use super::PortError;

/// A writer's output and its failed state.
pub(crate) struct Sink<W: Write> {
    /// The port name errors carry.
    pub(crate) port: String,
    /// The file name errors carry.
    pub(crate) file: String,
    /// `None` only after `into_inner`.
    out: Option<W>,
    failed: Option<PortError>,
}

impl<W: Write> Sink<W> {
    pub(crate) fn new(port: String, file: String, out: W) -> Self {
        Sink {
            port,
            file,
            out: Some(out),
            failed: None,
        }
    }

    /// The error that stopped the sink, if one did.
    pub(crate) fn check(&self) -> Result<(), PortError> {
        match &self.failed {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }

    /// Runs `f` on the output; an I/O error stops the sink and is returned.
    pub(crate) fn write(
        &mut self,
        f: impl FnOnce(&mut W) -> io::Result<()>,
    ) -> Result<(), PortError> {
        self.check()?;
        let Some(out) = self.out.as_mut() else {
            return Ok(());
        };
        f(out).map_err(|source| self.fail(source))
    }

    /// Pushes buffered output to the file.
    pub(crate) fn flush(&mut self) -> Result<(), PortError> {
        self.write(Write::flush)
    }

    /// Flushes and returns the output.
    pub(crate) fn into_inner(mut self) -> Result<W, PortError> {
        self.flush()?;
        match self.out.take() {
            Some(out) => Ok(out),
            // `out` is only taken here, by value, so it is still there.
            None => Err(PortError::Io {
                port: self.port.clone(),
                context: format!("closing {}", self.file),
                source: io::Error::other("output already taken"),
            }),
        }
    }

    /// Marks the sink failed with `source`; returns the error.
    fn fail(&mut self, source: io::Error) -> PortError {
        let e = PortError::Io {
            port: self.port.clone(),
            context: format!("writing {}", self.file),
            source,
        };
        self.failed = Some(e.duplicate());
        e
    }
}

impl<W: Write> Drop for Sink<W> {
    fn drop(&mut self) {
        if let Some(out) = self.out.as_mut() {
            // Nobody to report to: `flush` is there for callers who care.
            let _ = out.flush();
        }
    }
}
