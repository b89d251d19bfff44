//! The client's job operations: create (alone or in a batch), read, list, edit, the state
//! changes, a job's runs; dead letters; schedule previews.

use reqwest::Method;

use hourglass_api::{
    BackfillAccepted, BackfillRequest, BatchCreate, BatchCreated, BulkChanged, CreateJob, JobBrief,
    JobListQuery, PageQuery, PatchJob, PreviewRequest, ScheduleIn, SchedulePreview,
};

use super::{Client, Request};
use crate::error::Error;
use crate::types::{BulkAction, DeadLetter, DeadLetterPage, JobInfo, JobPage, JobRef, RunPage};

impl Client {
    /// `POST /v1/jobs`: creates a job, from a [`crate::NewJob`] or the contract's
    /// [`CreateJob`]. With a `key` that already exists and the same body, the node answers
    /// with the existing job instead.
    pub async fn create_job(&self, job: impl Into<CreateJob>) -> Result<JobInfo, Error> {
        let body = job.into();
        self.send(Request::new(Method::POST, &["v1", "jobs"]).json(&body)?)
            .await
    }

    /// `POST /v1/jobs/batch`: creates up to 1,000 jobs in one request, all or none. The answer
    /// has every job of the request in order (a keyed job that already existed included, its
    /// `created` false) and how many were created.
    pub async fn create_jobs<J: Into<CreateJob>>(
        &self,
        jobs: impl IntoIterator<Item = J>,
    ) -> Result<BatchCreated<JobInfo>, Error> {
        let body = batch(jobs);
        self.send(Request::new(Method::POST, &["v1", "jobs", "batch"]).json(&body)?)
            .await
    }

    /// `POST /v1/jobs/batch` with `Prefer: return=minimal`: as [`Client::create_jobs`], each
    /// job answered as its id, key, state, next due time and whether it was created (about a
    /// tenth of the bytes, for bulk loaders).
    pub async fn create_jobs_minimal<J: Into<CreateJob>>(
        &self,
        jobs: impl IntoIterator<Item = J>,
    ) -> Result<BatchCreated<JobBrief<'static>>, Error> {
        let request = Request::new(Method::POST, &["v1", "jobs", "batch"])
            .header("prefer", Some("return=minimal"))
            .json(&batch(jobs))?;
        self.send(request).await
    }

    /// `GET /v1/jobs/{id}`: the job, by id or by key ([`JobRef`]).
    pub async fn get_job(&self, job: impl Into<JobRef>) -> Result<JobInfo, Error> {
        self.get(&["v1", "jobs", &job.into().segment()]).await
    }

    /// `GET /v1/jobs`: one page of the namespace's jobs, oldest first, filtered by a
    /// [`crate::JobFilter`] or the contract's [`JobListQuery`] (whose `state` is the API's
    /// text, checked by the node).
    pub async fn list_jobs(&self, filter: impl Into<JobListQuery>) -> Result<JobPage, Error> {
        let query = filter.into();
        self.send(Request::new(Method::GET, &["v1", "jobs"]).query(&query))
            .await
    }

    /// `PATCH /v1/jobs/{id}`: each field the patch holds replaces the job's; the others stay.
    pub async fn update_job(
        &self,
        job: impl Into<JobRef>,
        patch: &PatchJob,
    ) -> Result<JobInfo, Error> {
        let segment = job.into().segment();
        self.send(Request::new(Method::PATCH, &["v1", "jobs", &segment]).json(patch)?)
            .await
    }

    /// `DELETE /v1/jobs/{id}`: cancels the job; an occurrence being delivered right now may
    /// still arrive.
    pub async fn cancel_job(&self, job: impl Into<JobRef>) -> Result<JobInfo, Error> {
        let segment = job.into().segment();
        self.send(Request::new(Method::DELETE, &["v1", "jobs", &segment]))
            .await
    }

    /// `POST /v1/jobs/{id}/pause`: the job's occurrences wait until it is resumed.
    pub async fn pause_job(&self, job: impl Into<JobRef>) -> Result<JobInfo, Error> {
        self.job_action(job.into(), "pause", None).await
    }

    /// `POST /v1/jobs/{id}/resume`: resumes a paused job (a recurring job continues from now).
    pub async fn resume_job(&self, job: impl Into<JobRef>) -> Result<JobInfo, Error> {
        self.job_action(job.into(), "resume", None).await
    }

    /// `POST /v1/jobs/{id}/trigger`: fires an occurrence now; the answer's `delivery_id` names
    /// it. With an `idempotency_key` (sent as `Idempotency-Key`) a retry of the same trigger
    /// fires nothing more and answers the first one's `delivery_id`.
    pub async fn trigger_job(
        &self,
        job: impl Into<JobRef>,
        idempotency_key: Option<&str>,
    ) -> Result<JobInfo, Error> {
        self.job_action(job.into(), "trigger", idempotency_key)
            .await
    }

    /// `POST /v1/jobs/{id}/backfill`: runs each nominal occurrence of a recurring job in
    /// `[from, to)` once, paced, before the job's own; answers how many it runs (0 when earlier
    /// backfills ran them all). At most 1,000 a request.
    pub async fn backfill_job(
        &self,
        job: impl Into<JobRef>,
        from: jiff::Timestamp,
        to: jiff::Timestamp,
    ) -> Result<BackfillAccepted, Error> {
        let segment = job.into().segment();
        let body = BackfillRequest {
            from: from.to_string(),
            to: to.to_string(),
        };
        self.send(Request::new(Method::POST, &["v1", "jobs", &segment, "backfill"]).json(&body)?)
            .await
    }

    /// `POST /v1/jobs/bulk/{action}`: pauses, resumes, cancels or triggers the namespace's live
    /// jobs that every label selector picks (`tenant=acme`, `kind`; at least one), and of
    /// `job_type` when given. One call changes at most 1,000 jobs: when the answer says `more`,
    /// call again with its `next_cursor` as `cursor` (a repeated trigger without it fires the
    /// first ones again).
    pub async fn bulk_jobs(
        &self,
        action: BulkAction,
        labels: &[String],
        job_type: Option<&str>,
        cursor: Option<&str>,
    ) -> Result<BulkChanged, Error> {
        let mut request = Request::new(Method::POST, &["v1", "jobs", "bulk", action.as_str()]);
        for label in labels {
            request.query.push(("label".to_owned(), label.clone()));
        }
        for (name, value) in [("type", job_type), ("cursor", cursor)] {
            if let Some(value) = value {
                request.query.push((name.to_owned(), value.to_owned()));
            }
        }
        self.send(request).await
    }

    async fn job_action(
        &self,
        job: JobRef,
        action: &str,
        idempotency_key: Option<&str>,
    ) -> Result<JobInfo, Error> {
        let segment = job.segment();
        let request = Request::new(Method::POST, &["v1", "jobs", &segment, action])
            .header("idempotency-key", idempotency_key);
        self.send(request).await
    }

    /// `GET /v1/jobs/{id}/runs`: delivery attempts of a job, newest first, a page at a time:
    /// `limit` (1–1,000, default 100) of them, older than `cursor` (the previous page's
    /// `next_cursor`) when given.
    pub async fn job_runs(
        &self,
        job: impl Into<JobRef>,
        limit: Option<usize>,
        cursor: Option<&str>,
    ) -> Result<RunPage, Error> {
        let segment = job.into().segment();
        let request = Request::new(Method::GET, &["v1", "jobs", &segment, "runs"])
            .query(&page(limit, cursor));
        self.send(request).await
    }

    /// `POST /v1/schedules/preview`: the next `count` due times of a schedule (default 10, at
    /// most 100) and the schedule in words; the node validates it as a create would and
    /// creates nothing.
    pub async fn preview_schedule(
        &self,
        schedule: impl Into<ScheduleIn>,
        count: Option<u64>,
    ) -> Result<SchedulePreview, Error> {
        self.preview_schedule_of(schedule, count, None).await
    }

    /// [`Client::preview_schedule`] with the fire times of job `job_id` (a UUID): a jittered
    /// schedule's offsets depend on the job.
    pub async fn preview_schedule_of(
        &self,
        schedule: impl Into<ScheduleIn>,
        count: Option<u64>,
        job_id: Option<&str>,
    ) -> Result<SchedulePreview, Error> {
        let body = PreviewRequest {
            schedule: schedule.into(),
            count,
            job_id: job_id.map(String::from),
        };
        self.send(Request::new(Method::POST, &["v1", "schedules", "preview"]).json(&body)?)
            .await
    }

    // -----------------------------------------------------------------------------------------
    // Dead letters

    /// `GET /v1/dead-letters`: one page of the namespace's dead letters, newest first.
    pub async fn list_dead_letters(
        &self,
        limit: Option<usize>,
        cursor: Option<&str>,
    ) -> Result<DeadLetterPage, Error> {
        let request =
            Request::new(Method::GET, &["v1", "dead-letters"]).query(&page(limit, cursor));
        self.send(request).await
    }

    /// `GET /v1/dead-letters/{id}`.
    pub async fn get_dead_letter(&self, id: &str) -> Result<DeadLetter, Error> {
        self.get(&["v1", "dead-letters", id]).await
    }

    /// `POST /v1/dead-letters/{id}/replay`: replays a dead letter as a new one-off job due now,
    /// and removes the dead letter. The answer is the new job.
    pub async fn replay_dead_letter(&self, id: &str) -> Result<JobInfo, Error> {
        self.send(Request::new(
            Method::POST,
            &["v1", "dead-letters", id, "replay"],
        ))
        .await
    }

    /// `DELETE /v1/dead-letters/{id}`: deletes a dead letter for good.
    pub async fn delete_dead_letter(&self, id: &str) -> Result<(), Error> {
        self.exchange(Request::new(Method::DELETE, &["v1", "dead-letters", id]))
            .await
            .map(drop)
    }
}

fn batch<J: Into<CreateJob>>(jobs: impl IntoIterator<Item = J>) -> BatchCreate {
    BatchCreate {
        jobs: jobs.into_iter().map(Into::into).collect(),
    }
}

/// A listing's `limit` and `cursor`, as the contract's query shape.
pub(super) fn page(limit: Option<usize>, cursor: Option<&str>) -> PageQuery {
    PageQuery {
        limit,
        cursor: cursor.map(str::to_owned),
    }
}
