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
    /// A file too big to keep for every gateway to serve.
    #[error("the file is {bytes} bytes; the database keeps files of at most {limit} bytes")]
    MediaTooBig { bytes: usize, limit: usize },
    /// A stored body did not parse.
    #[error("stored {what} does not parse: {reason}")]
    Body { what: &'static str, reason: String },
}

impl From<tokio_postgres::Error> for StoreError {
    fn from(e: tokio_postgres::Error) -> Self {
        // The server's own message (`ERROR: ...`) when there is one.
        match e.as_db_error() {
            Some(db) => StoreError::Query(format!("{}: {}", db.code().code(), db.message())),
            None => StoreError::Query(e.to_string()),
        }
    }
}

impl From<deadpool_postgres::PoolError> for StoreError {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        match e {
            deadpool_postgres::PoolError::Backend(e) => e.into(),
            other => StoreError::Query(other.to_string()),
        }
    }
}
