//! The cron jobs of one home: `$FERROCLAW_HOME/cron/jobs.json`, in
//! nanobot's format, written atomically (temp file + rename), so the CLI and
//! a running gateway share it.

use std::path::{Path, PathBuf};

use async_trait::async_trait;

use super::{CronError, CronJobs, JobsChange, JobsFile};
use crate::files::{read_json, write_json_atomically};

/// The jobs file.
#[derive(Debug)]
pub(super) struct JobsFileStore {
    path: PathBuf,
}

impl JobsFileStore {
    /// The jobs file of `home`.
    pub(super) fn new(home: &Path) -> Self {
        JobsFileStore { path: home.join("cron").join("jobs.json") }
    }

    fn error(&self, message: String) -> CronError {
        CronError::File { path: self.path.clone(), message }
    }
}

#[async_trait]
impl CronJobs for JobsFileStore {
    async fn load(&self) -> Result<JobsFile, CronError> {
        read_json(&self.path).map_err(|message| self.error(message))
    }

    async fn edit(&self, change: JobsChange<'_>) -> Result<(), CronError> {
        let mut file = self.load().await?;
        change(&mut file)?;
        write_json_atomically(&self.path, &file).map_err(|message| self.error(message))
    }
}
