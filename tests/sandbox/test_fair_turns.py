"""Clients take turns at the sandbox pool's workers: one client's queue cannot stall another's.

Attack round 4: 30 ``code_collab`` episodes of one client running spin
programs made another client's honest episode take 104 s instead of 0.4 s,
because every waiter was woken at once and the first to come took the worker.
"""

from __future__ import annotations

import threading
import time
from collections import deque

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_envs.sandbox import Sandbox, SandboxBusyError
from llm_envs.sandbox.fair import LOCAL, RoundRobin, as_client, client_key, current_client


def test_round_robin_serves_clients_in_turn_and_each_client_in_order():
    turns: RoundRobin[str] = RoundRobin()
    for client, waiter in [("a", "a1"), ("a", "a2"), ("a", "a3"), ("b", "b1"), ("c", "c1")]:
        turns.push(client, waiter)
    assert turns.pop() == "a1"
    turns.push("c", "c2")
    assert [turns.pop() for _ in range(len(turns))] == ["b1", "c1", "a2", "c2", "a3"]
    assert not turns


def test_a_client_back_at_once_after_its_turn_goes_behind_those_waiting():
    """One request at a time, resubmitted as each is served, cannot take every turn."""
    turns: RoundRobin[str] = RoundRobin()
    turns.push("b", "b1")
    turns.push("b", "b2")
    served = []
    for i in range(4):
        turns.push("a", f"a{i}")  # a's queue was empty: it arrives anew each time
        served.append(turns.pop())
    assert served == ["b1", "a0", "b2", "a1"]


def test_a_sequential_client_goes_ahead_of_a_flood_served_since_its_last_turn():
    turns: RoundRobin[str] = RoundRobin()
    for i in range(5):
        turns.push("flood", f"f{i}")
    assert turns.pop() == "f0"
    turns.push("honest", "h0")  # never served
    assert turns.pop() == "h0"
    assert turns.pop() == "f1"
    turns.push("honest", "h1")  # served before f1's turn: still ahead of the flood
    assert turns.pop() == "h1"


def test_round_robin_forgets_a_waiter_that_gave_up():
    turns: RoundRobin[str] = RoundRobin()
    turns.push("a", "a1")
    turns.push("b", "b1")
    assert turns.remove("a", "a1") and not turns.remove("a", "a1")
    assert len(turns) == 1 and turns.pop() == "b1"


@given(st.lists(st.sampled_from("abcd"), max_size=60))
def test_round_robin_is_fifo_per_client_and_never_serves_a_client_twice_while_others_wait(pushes):
    turns: RoundRobin[tuple[str, int]] = RoundRobin()
    for number, client in enumerate(pushes):
        turns.push(client, (client, number))
    served = [turns.pop() for _ in range(len(pushes))]
    for client in set(pushes):
        mine = [number for c, number in served if c == client]
        assert mine == sorted(mine)  # FIFO within a client
    # Round robin: before a client's k-th turn, every client with at least k
    # waiters has had k - 1 turns.
    queued = {c: pushes.count(c) for c in pushes}
    had: dict[str, int] = dict.fromkeys(queued, 0)
    for client, _ in served:
        had[client] += 1
        for other, count in queued.items():
            assert had[other] >= min(count, had[client] - 1)


def test_the_client_key_is_local_unless_set_and_ipv6_hosts_are_one_client():
    assert current_client() == LOCAL
    with as_client("10.0.0.7"):
        assert current_client() == "10.0.0.7"
    assert current_client() == LOCAL
    assert client_key("::ffff:10.0.0.7") == "10.0.0.7"
    assert client_key("2001:db8:1:2::5") == client_key("2001:db8:1:2:ffff::9")
    assert client_key(None) == "unknown"


def test_a_client_with_one_run_waits_one_turn_not_behind_another_clients_queue():
    """Client A queues six 0.4 s runs on one worker, then B one: B's is done second."""
    finished: deque[str] = deque()
    program = "import time\ndef f():\n    time.sleep(0.4)\n    return 1"

    def run(client: str, pool: Sandbox) -> None:
        with as_client(client):
            report = pool.run_tests(program, ["assert f() == 1"])
        assert report.all_passed, report
        finished.append(client)

    with Sandbox(workers=1, timeout=30.0) as pool:
        flood = [threading.Thread(target=run, args=("a", pool)) for _ in range(6)]
        for thread in flood:
            thread.start()
        time.sleep(0.25)  # A's runs are queued (one runs)
        honest = threading.Thread(target=run, args=("b", pool))
        honest.start()
        for thread in [*flood, honest]:
            thread.join(timeout=60)
    order = list(finished)
    assert len(order) == 7
    assert order.index("b") == 1, order  # after the run of A's that held the worker only


def test_a_closed_pool_refuses_its_waiters_and_takes_their_workers_back():
    errors: list[BaseException] = []
    program = "import time\ndef f():\n    time.sleep(0.5)\n    return 1"
    pool = Sandbox(workers=1, timeout=30.0)

    def run(client: str) -> None:
        try:
            with as_client(client):
                pool.run_tests(program, ["assert f() == 1"])
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c,)) for c in ("a", "a", "b")]
    for thread in threads:
        thread.start()
    time.sleep(0.2)
    pool.close()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    assert sorted(type(e).__name__ for e in errors) == ["SandboxClosedError"] * 2


def test_a_caller_past_its_give_up_time_stops_waiting_and_the_pool_carries_on():
    program = "import time\ndef f():\n    time.sleep(1.5)\n    return 1"
    with Sandbox(workers=1, timeout=30.0) as pool:
        blocker = threading.Thread(target=pool.run_tests, args=(program, ["assert f() == 1"]))
        blocker.start()
        time.sleep(0.3)  # it holds the only worker
        began = time.monotonic()
        with as_client("b", give_up=began + 0.3), pytest.raises(SandboxBusyError, match="b"):
            pool.run_tests("x = 1", ["assert x == 1"])
        gave_up = time.monotonic() - began
        blocker.join(timeout=30)
        assert pool.run_tests("x = 1", ["assert x == 1"]).all_passed  # nobody left waiting
    assert 0.25 < gave_up < 1.0


def test_a_site_of_thousands_of_ipv6_prefixes_is_one_client_and_takes_one_turn_in_two():
    # One /48 holds 65,536 /64s, and one IPv4 host as many 6to4 /64s: were each a client,
    # an honest client would wait behind thousands of them (a turn in 5,001).
    site = [f"2001:db8:7:{i:x}::1" for i in range(2500)]
    sixtofour = [f"2002:c000:204:{i:x}::1" for i in range(2500)]  # all of 192.0.2.4
    turns: RoundRobin[str] = RoundRobin()
    for address in site + sixtofour:
        turns.push(client_key(address), address)
    turns.push(client_key("198.51.100.9"), "honest")
    served = [turns.pop() for _ in range(3)]
    assert "honest" in served
    assert {client_key(a) for a in site} == {"2001:db8:7::/48"}
    assert {client_key(a) for a in sixtofour} == {"2002:c000:204::/48"}


def test_one_host_behind_teredo_is_one_client_whatever_its_server_port_and_flags():
    # 2001:0:SERVER:FLAGS:~PORT:~CLIENT: 2**48 addresses of one host (192.0.2.45)
    addresses = [
        f"2001:0:{server >> 16:x}:{server & 0xFFFF:x}:{flags:x}:{port:x}:3fff:fdd2"
        for server, flags, port in [(0x4136E378, 0x8000, 0x63BF), (0x01020304, 0, 1), (0, 1, 2)]
    ]
    assert {client_key(a) for a in addresses} == {"teredo 192.0.2.45"}


@pytest.mark.parametrize(
    ("address", "client"),
    [
        ("::ffff:192.0.2.1", "192.0.2.1"),  # a dual-stack socket's IPv4 peer
        ("2002:c000:201:ffff::2", "2002:c000:201::/48"),  # 6to4: its IPv4 address's /48
        ("2001:0:4136:e378:8000:63bf:3fff:fdfe", "teredo 192.0.2.1"),
        ("64:ff9b::c000:201", "64:ff9b::c000:201"),  # NAT64, the well-known prefix
        ("64:ff9b:1::c000:201", "64:ff9b:1::/48"),  # NAT64, local use: the NAT is one client
        ("::c000:201", "::c000:201"),  # IPv4-compatible
        ("::ffff:0:c000:201", "::ffff:0:c000:201"),  # IPv4-translated
        ("::1", "::1"),
        ("::", "::"),
        ("2001:db8:1:ffff:1::1", "2001:db8:1::/48"),
        ("fe80::1", "fe80::/10"),  # link-local: one client, whatever /48 of it
        ("fe80:1234::1", "fe80::/10"),
        ("febf:ffff::1%eth0", "fe80::/10"),
    ],
)
def test_no_ipv6_address_counts_as_an_ipv4_client_but_its_mapped_form(address, client):
    # Round 9: 6to4, Teredo and NAT64 sources counted as the IPv4 address they carry, so
    # whoever routes one took that IPv4 client's share; ::1, ::, ::a.b.c.d shared "::/48".
    assert client_key(address) == client
