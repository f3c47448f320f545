# The kernel: a Python interpreter that outlives its cells. It reads one
# cell a line from stdin, as JSON {"code": "..."}, runs it in the one
# namespace every cell shares, and answers with one JSON line
# {"output": "...", "error": "..." or null}: that line is the cell's end.
# Whatever a cell raises, KeyboardInterrupt and SystemExit too, is its
# error, and the kernel reads the next cell.
import contextlib
import io
import json
import sys
import traceback

namespace = {"__name__": "__main__"}
replies = sys.stdout
for line in sys.stdin:
    code = json.loads(line)["code"]
    output = io.StringIO()
    error = None
    try:
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            exec(compile(code, "<cell>", "exec"), namespace)
    except BaseException as e:
        # From the cell's own frame on: the kernel's frame is noise.
        error = "".join(traceback.format_exception(type(e), e, e.__traceback__.tb_next))
    replies.write(json.dumps({"output": output.getvalue(), "error": error}) + "\n")
    replies.flush()
