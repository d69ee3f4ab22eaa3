"""Workload names are Kueue's (`GetWorkloadNameForOwnerWithGVK`): the expected hashes are
`sha1sum` of the bytes Kueue hashes (kind, group, owner name, owner uid[, extra], joined
by newlines), computed outside this code."""

from controller.integrations.framework.workload_names import (
    SHORT_MAX_LENGTH,
    object_workload_name,
    workload_name,
)


def test_a_jobs_name_is_kind_name_and_the_hash_of_kind_group_name_uid() -> None:
    # printf 'Job\nbatch\npi\n0b2c6a8e-1111-4222-8333-444455556666' | sha1sum → 14bd0…
    uid = "0b2c6a8e-1111-4222-8333-444455556666"
    assert workload_name("Job", "batch", "pi", uid) == "job-pi-14bd0"
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "pi", "uid": uid}}
    assert object_workload_name(job) == "job-pi-14bd0"


def test_the_core_group_is_an_empty_line() -> None:
    # printf 'Pod\n\nweb-0\nabc' | sha1sum → 80d94…
    assert workload_name("Pod", "", "web-0", "abc") == "pod-web-0-80d94"
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "uid": "abc"}}
    assert object_workload_name(pod) == "pod-web-0-80d94"


def test_an_extra_part_is_hashed_after_a_newline() -> None:
    # printf 'LeaderWorkerSet\nleaderworkerset.x-k8s.io\nlws-2\nu2\n7' | sha1sum → 7bec8…
    name = workload_name("LeaderWorkerSet", "leaderworkerset.x-k8s.io", "lws-2", "u2", "7")
    assert name == "leaderworkerset-lws-2-7bec8"


def test_a_long_name_is_cut_to_253_with_the_hash_of_the_whole_name() -> None:
    # printf "JobSet\njobset.x-k8s.io\n$(300 a's)\nu1" | sha1sum → 5790d…
    name = workload_name("JobSet", "jobset.x-k8s.io", "a" * 300, "u1")
    assert name == ("jobset-" + "a" * 300)[:247] + "-5790d"
    assert len(name) == 253


def test_short_workload_names_cut_to_63() -> None:
    name = workload_name("JobSet", "jobset.x-k8s.io", "a" * 300, "u1", max_length=SHORT_MAX_LENGTH)
    assert name == ("jobset-" + "a" * 300)[:57] + "-5790d"
    assert len(name) == 63


def test_a_job_made_again_under_its_name_gets_another_workload() -> None:
    assert workload_name("Job", "batch", "pi", "uid-1") != workload_name(
        "Job", "batch", "pi", "uid-2"
    )
