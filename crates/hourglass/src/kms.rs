//! AWS KMS for the secrets key (envelope encryption): the operator keeps a KMS key, KMS makes a
//! 256-bit data key under it and hands out only that key wrapped (its `CiphertextBlob`), which
//! the node is given; at start the node has KMS unwrap it once (`Decrypt`) and seals signing
//! secrets with the plaintext, which never leaves the process.
//!
//! Region, endpoint and credentials come from the standard AWS chain, as the DynamoDB store's
//! do (`AWS_REGION`, `AWS_ENDPOINT_URL` or `AWS_ENDPOINT_URL_KMS`, the profile, the container or
//! instance role, the Lambda function's role).

use std::time::Duration;

use aws_sdk_kms::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_kms::primitives::Blob;
use aws_sdk_kms::types::DataKeySpec;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::json;

/// How long one KMS request may take (the SDK's standard retries come on top: three attempts).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Why KMS did not unwrap a data key.
#[derive(Debug)]
pub enum KmsError {
    /// KMS answered and refused: no permission, a blob that is not a data key of this account's
    /// keys, a disabled or deleted key. The same start fails the same way.
    Refused(String),
    /// KMS was not reached, or answered that it cannot serve now (throttled, unavailable): a
    /// later start may succeed.
    Unavailable(String),
}

impl std::fmt::Display for KmsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KmsError::Refused(why) => write!(f, "AWS KMS refused: {why}"),
            KmsError::Unavailable(why) => write!(f, "AWS KMS could not answer: {why}"),
        }
    }
}

impl std::error::Error for KmsError {}

/// A KMS client on the standard AWS chain, with the HTTP client on rustls/ring (the targets
/// crate's settings) and the SDK's standard retries: one call at start is worth three tries.
async fn client() -> aws_sdk_kms::Client {
    let connection: hourglass_targets::ConnectionConfig =
        serde_json::from_value(json!({"kind": "aws"})).expect("an AWS connection with no settings");
    let sdk = hourglass_targets::sdk_config(&connection, REQUEST_TIMEOUT).await;
    let config = aws_sdk_kms::config::Builder::from(&sdk)
        .retry_config(aws_sdk_kms::config::retry::RetryConfig::standard())
        .build();
    aws_sdk_kms::Client::from_conf(config)
}

/// Error codes with which KMS says "not now" rather than "no".
const TRANSIENT_CODES: [&str; 4] = [
    "KMSInternalException",
    "ThrottlingException",
    "KMSThrottlingException",
    "DependencyTimeoutException",
];

fn describe<E, R>(e: &SdkError<E, R>) -> KmsError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
    R: std::fmt::Debug,
{
    if let SdkError::ServiceError(service) = e {
        let err = service.err();
        let code = err.code().unwrap_or("an error without a code");
        let why = match err.message() {
            Some(message) => format!("{code}: {message}"),
            None => code.to_owned(),
        };
        return if TRANSIENT_CODES.contains(&code) {
            KmsError::Unavailable(why)
        } else {
            KmsError::Refused(why)
        };
    }
    // Not reached, or no answer in time: the error and its causes on one line.
    let mut why = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        why = format!("{why}: {c}");
        cause = c.source();
    }
    KmsError::Unavailable(why)
}

/// The plaintext of the data key `blob` wraps (`Decrypt`).
pub async fn decrypt(blob: Vec<u8>) -> Result<Vec<u8>, KmsError> {
    let answer = client()
        .await
        .decrypt()
        .ciphertext_blob(Blob::new(blob))
        .send()
        .await
        .map_err(|e| describe(&e))?;
    let plaintext = answer
        .plaintext
        .ok_or_else(|| KmsError::Refused("its answer holds no plaintext".into()))?;
    Ok(plaintext.into_inner())
}

/// A new 256-bit data key under the KMS key `key_id` (key id, ARN, alias name or alias ARN),
/// wrapped: its `CiphertextBlob` in base64. `GenerateDataKeyWithoutPlaintext`, so the plaintext
/// never reaches this machine at all.
pub async fn new_data_key(key_id: &str) -> Result<String, KmsError> {
    let answer = client()
        .await
        .generate_data_key_without_plaintext()
        .key_id(key_id)
        .key_spec(DataKeySpec::Aes256)
        .send()
        .await
        .map_err(|e| describe(&e))?;
    let blob = answer
        .ciphertext_blob
        .ok_or_else(|| KmsError::Refused("its answer holds no CiphertextBlob".into()))?;
    Ok(BASE64.encode(blob.into_inner()))
}
