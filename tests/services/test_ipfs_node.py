import pytest

from verity.devnet import IpfsNode, ServiceError

pytestmark = pytest.mark.integration


def test_restart_after_sigkill_cleans_stale_lock_succeeds(tmp_path):
    node = IpfsNode(tmp_path / "node")
    try:
        node.start()
        with node.storage(timeout=10) as client:
            cid = client.put_bytes(b"survives a crash")
        peer_id = node.peer_id
        node.kill()  # as a crash would: repo.lock and api stay behind
        assert (node.repo_path / "repo.lock").exists()
        node.start()
        assert node.peer_id == peer_id
        with node.storage(timeout=10) as client:
            assert client.get_bytes(cid) == b"survives a crash"
    finally:
        node.stop()
    assert not node.running()
    assert not (node.repo_path / "repo.lock").exists() and not (node.repo_path / "api").exists()
    assert "Daemon is ready" in node.log_path.read_text()


def test_start_on_busy_port_reverts(ipfs_node, tmp_path):
    with pytest.raises(ServiceError, match="already in use"):
        IpfsNode(tmp_path / "clash", api_port=ipfs_node.api_port).start()


def test_two_nodes_in_one_process_connected_succeeds(ipfs_pair):
    first, second = ipfs_pair
    assert first.api_port != second.api_port and first.peer_id != second.peer_id
    with second.storage(timeout=5) as client:
        assert any(first.peer_id in addr for addr in client.peers())
