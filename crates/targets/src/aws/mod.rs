//! The AWS kinds: EventBridge, SQS, SNS and Lambda, on the official SDK with its HTTP client on
//! rustls/ring. The SDK's own retries are off: an attempt is one request, and the job's retry
//! policy (with its backoff, dead letters and the destination's breaker) decides what follows.

mod eventbridge;
mod lambda;
mod sns;
mod sqs;

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_sqs::config::http::HttpResponse;
use aws_sdk_sqs::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};
use aws_smithy_http_client::tls;
use hourglass_core::{Occurrence, Target};
use hourglass_engine::{ClaimCheck, Verdict};

use crate::config::ConnectionConfig;

pub use eventbridge::EventBridge;
pub use lambda::Lambda;
pub use sns::Sns;
pub use sqs::Sqs;

/// One AWS connection: a client per service, made when the connection is opened (no request is
/// sent until a delivery needs one).
pub struct AwsConnection {
    eventbridge: EventBridge,
    sqs: Sqs,
    sns: Sns,
    lambda: Lambda,
}

impl AwsConnection {
    pub async fn open(name: &str, config: &ConnectionConfig, timeout: Duration) -> Self {
        let sdk = sdk_config(config, timeout).await;
        Self {
            eventbridge: EventBridge::new(name, &sdk),
            sqs: Sqs::new(name, &sdk),
            sns: Sns::new(name, &sdk),
            lambda: Lambda::new(&sdk),
        }
    }

    pub async fn publish(&self, occ: &Occurrence, claim: &ClaimCheck) -> Verdict {
        match &occ.spec.target {
            Target::Eventbridge(t) => self.eventbridge.publish(t, occ, claim).await,
            Target::Sqs(t) => self.sqs.publish(t, occ, claim).await,
            Target::Sns(t) => self.sns.publish(t, occ, claim).await,
            Target::Lambda(t) => self.lambda.publish(t, occ).await,
            other => Verdict::GiveUp {
                reason: format!("an AWS connection cannot deliver a {} target", other.kind()),
            },
        }
    }
}

/// The SDK's configuration for one connection: region, endpoint and credentials from the
/// connection when it gives them, else from the standard chain (environment, profile, container
/// or instance role); the HTTP client on rustls with ring; no SDK retries; the delivery timeout
/// on every request. Public for the bench and the tests, which read back what was published.
pub async fn sdk_config(config: &ConnectionConfig, timeout: Duration) -> SdkConfig {
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(
            tls::rustls_provider::CryptoMode::Ring,
        ))
        .build_https();
    let mut loader = aws_config::defaults(BehaviorVersion::latest())
        .http_client(http)
        .retry_config(RetryConfig::disabled())
        .timeout_config(
            TimeoutConfig::builder()
                .operation_timeout(timeout)
                .connect_timeout(timeout.min(Duration::from_secs(5)))
                .build(),
        );
    if let Some(region) = &config.region {
        loader = loader.region(Region::new(region.clone()));
    }
    if let Some(endpoint) = &config.endpoint_url {
        loader = loader.endpoint_url(endpoint);
    }
    if let (Some(id), Some(secret)) = (&config.access_key_id, &config.secret_access_key) {
        loader = loader.credentials_provider(aws_credential_types::Credentials::new(
            id.clone(),
            secret.clone(),
            None,
            None,
            "hourglass-connection",
        ));
    }
    loader.load().await
}

/// Error codes AWS services answer when the caller should slow down or try again later.
const TRANSIENT_CODES: [&str; 22] = [
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "LimitExceededException",
    "RequestTimeout",
    "RequestTimeoutException",
    "InternalError",
    "InternalFailure",
    "InternalErrorException",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "ServiceException",
    "KMSThrottlingException",
    "ResourceConflictException",
    "ExpiredToken",
    "ExpiredTokenException",
    "EC2ThrottledException",
];

/// Whether an error code says the resource does not exist or the credentials may not use it.
/// The reason a tenant reads (in runs and dead letters) must not tell these apart, nor carry
/// the service's message: "queue does not exist" against "not authorized" says what exists in
/// the operator's account, and an access-denied message names the operator's IAM principal.
pub(crate) fn unavailable(code: &str) -> bool {
    const MARKS: [&str; 11] = [
        "NotFound",
        "NonExistent",
        "AccessDenied",
        "NotAuthorized",
        "AuthorizationError",
        "Forbidden",
        "InvalidClientTokenId",
        "UnrecognizedClient",
        "InvalidAccessKeyId",
        "SignatureDoesNotMatch",
        "KMS",
    ];
    !transient_code(code) && MARKS.iter().any(|mark| code.contains(mark))
}

/// The one reason for a resource that is missing or out of the credentials' reach.
fn unavailable_reason(service: &str) -> String {
    format!(
        "{service} refused the request: the target does not exist or the connection's credentials may not use it"
    )
}

/// Whether a service's error code (or a batch entry's) asks for a later try.
pub(crate) fn transient_code(code: &str) -> bool {
    TRANSIENT_CODES.contains(&code) || code.ends_with("Throttled") || code.contains("Throttl")
}

/// A failed request's verdict: no answer, a timeout, a 5xx, a 429 or a throttling code is
/// transient (a `Retry-After` it sent is kept); any other answer (no such queue, access denied,
/// a payload the service will not take) is permanent.
pub(crate) fn verdict_of<E>(service: &str, err: &SdkError<E, HttpResponse>) -> Verdict
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    match err {
        SdkError::ServiceError(e) => {
            let status = e.raw().status().as_u16();
            let code = e.err().code().unwrap_or("unknown");
            let message = e.err().message().unwrap_or_default();
            let reason = if unavailable(code) || matches!(status, 401 | 403 | 404) {
                unavailable_reason(service)
            } else {
                format!("{service} answered {status} {code}: {message}")
            };
            if status >= 500 || status == 429 || transient_code(code) {
                let after = e
                    .raw()
                    .headers()
                    .get("retry-after")
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(Duration::from_secs);
                Verdict::Retry { after, reason }
            } else {
                Verdict::GiveUp { reason }
            }
        }
        SdkError::TimeoutError(_) => Verdict::Retry {
            after: None,
            reason: format!("{service} did not answer in time"),
        },
        SdkError::DispatchFailure(_) => Verdict::Retry {
            after: None,
            reason: format!(
                "{service} could not be reached: {}",
                DisplayErrorContext(err)
            ),
        },
        SdkError::ResponseError(_) => Verdict::Retry {
            after: None,
            reason: format!(
                "{service} sent an answer that could not be read: {}",
                DisplayErrorContext(err)
            ),
        },
        SdkError::ConstructionFailure(_) => Verdict::GiveUp {
            reason: format!(
                "the {service} request could not be built: {}",
                DisplayErrorContext(err)
            ),
        },
        other => Verdict::Retry {
            after: None,
            reason: format!("{service}: {}", DisplayErrorContext(other)),
        },
    }
}

/// A batch entry's verdict from the code and fault the service gave it.
pub(crate) fn entry_verdict(
    service: &str,
    code: &str,
    message: &str,
    sender_fault: bool,
) -> Verdict {
    let reason = if unavailable(code) {
        unavailable_reason(service)
    } else {
        format!("{service} refused the entry: {code}: {message}")
    };
    if !sender_fault || transient_code(code) {
        Verdict::Retry {
            after: None,
            reason,
        }
    } else {
        Verdict::GiveUp { reason }
    }
}

/// The verdicts of a batch whose entries were sent with ids `"0"`, `"1"`, …: delivered for the
/// ids the service lists as successful, the entry's own verdict for those it lists as failed
/// (id, code, message, sender fault), and a retry for any it does not mention.
pub(crate) fn batch_verdicts<'a>(
    service: &str,
    count: usize,
    successful: impl Iterator<Item = &'a str>,
    failed: impl Iterator<Item = (&'a str, &'a str, &'a str, bool)>,
) -> Vec<Verdict> {
    let mut verdicts = vec![
        Verdict::Retry {
            after: None,
            reason: format!("{service} did not report this entry"),
        };
        count
    ];
    for id in successful {
        if let Some(v) = id.parse::<usize>().ok().and_then(|i| verdicts.get_mut(i)) {
            *v = Verdict::Delivered;
        }
    }
    for (id, code, message, sender_fault) in failed {
        if let Some(v) = id.parse::<usize>().ok().and_then(|i| verdicts.get_mut(i)) {
            *v = entry_verdict(service, code, message, sender_fault);
        }
    }
    verdicts
}

/// Every entry of a batch gets the verdict of the request that carried them.
pub(crate) fn all(count: usize, verdict: Verdict) -> Vec<Verdict> {
    vec![verdict; count]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttling_and_server_faults_are_retried_and_sender_faults_are_not() {
        assert!(matches!(
            entry_verdict("sqs", "ThrottlingException", "", true),
            Verdict::Retry { .. }
        ));
        assert!(matches!(
            entry_verdict("sqs", "InternalError", "", false),
            Verdict::Retry { .. }
        ));
        assert!(matches!(
            entry_verdict("sqs", "InvalidParameterValue", "too long", true),
            Verdict::GiveUp { .. }
        ));
        assert!(transient_code("RequestThrottled"));
        assert!(!transient_code("AccessDenied"));
        assert!(!transient_code("AWS.SimpleQueueService.NonExistentQueue"));
    }

    #[test]
    fn a_missing_resource_and_a_denied_one_read_the_same_and_name_nothing() {
        let missing = entry_verdict(
            "sns",
            "NotFound",
            "Topic does not exist: arn:aws:sns:eu-central-1:111122223333:other-app",
            true,
        );
        let denied = entry_verdict(
            "sns",
            "AuthorizationError",
            "User: arn:aws:iam::111122223333:user/hourglass is not authorized",
            true,
        );
        let (Verdict::GiveUp { reason: a }, Verdict::GiveUp { reason: b }) = (&missing, &denied)
        else {
            panic!("both are permanent: {missing:?} {denied:?}");
        };
        assert_eq!(a, b);
        assert!(!a.contains("111122223333"), "{a}");
        assert!(unavailable("AWS.SimpleQueueService.NonExistentQueue"));
        assert!(unavailable("ResourceNotFoundException"));
        assert!(!unavailable("InvalidParameterValue"));
    }
}
