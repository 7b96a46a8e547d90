//! The cron jobs of several gateway processes: the database's `cron_jobs`
//! table, one row per job holding the job's JSON (the jobs file's shape).
//! Every change is one transaction that notifies the other processes'
//! schedulers ([`PgStore::edit_cron_jobs`]).

use async_trait::async_trait;
use ferroclaw_store::PgStore;

use super::{CronError, CronJob, CronJobs, JobsChange, JobsFile};

/// The `cron_jobs` table.
#[derive(Debug)]
pub(super) struct CronTable {
    db: PgStore,
}

impl CronTable {
    /// The jobs in `db`.
    pub(super) fn new(db: PgStore) -> Self {
        CronTable { db }
    }
}

#[async_trait]
impl CronJobs for CronTable {
    async fn load(&self) -> Result<JobsFile, CronError> {
        let rows = self.db.cron_jobs().await.map_err(database)?;
        Ok(JobsFile { version: 1, jobs: rows.into_iter().filter_map(job_of_row).collect() })
    }

    async fn edit(&self, change: JobsChange<'_>) -> Result<(), CronError> {
        self.db
            .edit_cron_jobs(|rows| {
                let mut file = JobsFile {
                    version: 1,
                    jobs: rows.iter().cloned().filter_map(job_of_row).collect(),
                };
                change(&mut file)?;
                let mut changed = Vec::with_capacity(file.jobs.len());
                for job in &file.jobs {
                    let body = serde_json::to_value(job)
                        .map_err(|e| CronError::Database(format!("job {}: {e}", job.id)))?;
                    changed.push((job.id.clone(), body));
                }
                // Rows that do not parse as a job are kept as they are.
                let unreadable = |body: &serde_json::Value| {
                    serde_json::from_value::<CronJob>(body.clone()).is_err()
                };
                changed.extend(rows.iter().filter(|(_, body)| unreadable(body)).cloned());
                *rows = changed;
                Ok(())
            })
            .await
            .map_err(database)?
    }
}

/// A job from its row; `None` (logged) when the row is not a job.
fn job_of_row((id, body): (String, serde_json::Value)) -> Option<CronJob> {
    match serde_json::from_value(body) {
        Ok(job) => Some(job),
        Err(e) => {
            tracing::warn!("cron job {id} in the database does not parse ({e}); skipped");
            None
        }
    }
}

fn database(e: ferroclaw_store::StoreError) -> CronError {
    CronError::Database(e.to_string())
}
