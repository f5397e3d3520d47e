//! The private cluster as a library: several handles on one data directory share one
//! postmaster, and only the one that started it stops it.

use std::os::unix::fs::PermissionsExt;

use sqlx::{Connection, PgConnection};
use standmeet::db::PrivateCluster;

#[tokio::test]
async fn a_second_start_attaches_to_the_running_cluster_and_only_the_first_stops_it() {
    let scratch = tempfile::Builder::new()
        .prefix("standmeet-pg-test")
        .tempdir()
        .unwrap();
    std::fs::set_permissions(scratch.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let root = scratch.path().join("pg");

    let first = PrivateCluster::start(&root).unwrap();
    assert!(first.is_owned());
    let second = PrivateCluster::start(&root).unwrap();
    assert!(!second.is_owned(), "the cluster was already running");
    assert_eq!(second.port(), first.port());
    drop(second);

    // Still running after the second handle is gone.
    let mut conn = PgConnection::connect(&first.database_url("postgres"))
        .await
        .unwrap();
    let one: i32 = sqlx::query_scalar("SELECT 1")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(one, 1);
    conn.close().await.unwrap();

    // Password authentication: a wrong password is refused.
    let wrong = first
        .database_url("postgres")
        .replacen("postgres:", "postgres:x", 1);
    assert!(PgConnection::connect(&wrong).await.is_err());

    first.stop().unwrap();
    assert!(!root.join("data/postmaster.pid").exists());
    assert!(
        !PrivateCluster::stop_if_running(&root).unwrap(),
        "nothing left to stop"
    );
}
