//! What can go wrong with the store, in words a person can act on.

/// Why the store could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The configured store is not something we can use.
    #[error("store {url}: {reason}")]
    BadUrl { url: String, reason: String },
    /// The database cannot be reached (at start, or when a pool is empty).
    #[error(
        "cannot reach the database {url}: {reason} (to run on this box's files instead, remove [gateway] store and unset FERROCLAW_DATABASE_URL)"
    )]
    Unreachable { url: String, reason: String },
    /// The database's schema was made by a newer ferroclaw.
    #[error(
        "the database {url} has schema version {found}, newer than this ferroclaw's {known}: upgrade ferroclaw on this machine (it refuses to start rather than misread the data)"
    )]
    SchemaTooNew { url: String, found: i32, known: i32 },
    /// The schema is older than the binary and migrations are turned off.
    #[error(
        "the database {url} has schema version {found}, older than this ferroclaw's {known}: run `ferroclaw gateway migrate` (or remove store_migrate = false)"
    )]
    SchemaTooOld { url: String, found: i32, known: i32 },
    /// A query failed.
    #[error("database: {0}")]
    Query(String),
    /// The database went away while running (connection refused or lost,
    /// the server shutting down or starting): asking again later may work.
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
    /// A file too big to keep for every gateway to serve.
    #[error("the file is {bytes} bytes; the database keeps files of at most {limit} bytes")]
    MediaTooBig { bytes: usize, limit: usize },
    /// A stored body did not parse.
    #[error("stored {what} does not parse: {reason}")]
    Body { what: &'static str, reason: String },
}

impl StoreError {
    /// True when the database cannot be reached now (an outage, not a
    /// refusal): a reader should say "try again shortly", not "failed".
    pub fn is_unavailable(&self) -> bool {
        matches!(self, StoreError::Unavailable(_) | StoreError::Unreachable { .. })
    }
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        // The server's own message (`ERROR: ...`) when there is one.
        match e.as_db_error() {
            Some(db) => {
                let code = db.code().code();
                let text = format!("{code}: {}", db.message());
                // Class 08 is a connection exception; 57P0x the server
                // shutting down, crashed, or not accepting connections yet.
                match code.starts_with("08") || code.starts_with("57P0") {
                    true => StoreError::Unavailable(text),
                    false => StoreError::Query(text),
                }
            }
            None if lost_connection(&e) => StoreError::Unavailable(e.to_string()),
            None => StoreError::Query(e.to_string()),
        }
    }
}

/// True when a client-side error is the connection failing (closed, I/O,
/// no answer in time), not a query the server refused or a value that did
/// not convert.
fn lost_connection(e: &tokio_postgres::Error) -> bool {
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if s.is::<std::io::Error>() {
            return true;
        }
        source = s.source();
    }
    e.is_closed() || e.to_string().starts_with("timeout")
}

impl From<deadpool_postgres::PoolError> for StoreError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        match e {
            deadpool_postgres::PoolError::Backend(e) => e.into(),
            deadpool_postgres::PoolError::Timeout(_) => {
                StoreError::Unavailable("timed out waiting for a connection".into())
            }
            other => StoreError::Query(other.to_string()),
        }
    }
}
