#!/bin/sh
# Claude Code: add toolcage's MCP endpoint with the agent key scripts/run printed.
exec claude mcp add --transport http toolcage http://127.0.0.1:8080/mcp \
  --header "Authorization: Bearer ${TOOLCAGE_AGENT_KEY:?set TOOLCAGE_AGENT_KEY}"
