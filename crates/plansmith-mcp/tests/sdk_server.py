"""An MCP server written with the official Python SDK (`mcp` on PyPI, pinned in
scripts/requirements-ci.txt), speaking stdio. Its `grow` tool adds a tool at run time and
tells the client with `notifications/tools/list_changed`, so the test sees a real SDK's
catalog change mid-run."""

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("sdk-grows")


@server.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return text


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the `shout` tool, then tell the client the tool list changed."""

    def shout(text: str) -> str:
        """Say the text in capitals."""
        return text.upper()

    server.add_tool(shout)
    await ctx.session.send_tool_list_changed()
    return "added shout"


if __name__ == "__main__":
    server.run()
