BATCH: int
BUFSIZE: int

def recv_batch(
    fd: int, max: int, buffer: bytearray, wait: bool, /
) -> list[tuple[bytes, bytes, int, bool, bool]]: ...
def send_batch(fd: int, items: list[tuple[bytes, bytes]], /) -> int: ...
