-- Numbers in the prose come from the program, run when the book is built:
--     ```{.run cmd="./cancellation --offset-sweep"}
--     ```
-- runs the command (with sh, in the chapter's directory, alone: see LOCK)
-- and shows what it prints as a code block of class "output"; with
-- format="markdown" its output is read as Markdown instead (the tables of
-- common/table.h). A command that fails fails the build.
--
-- The command's stderr is not captured: it goes to the build log, where a
-- failure's explanation then stands just above the error below. It must not
-- write files: tup would reject the outputs it was not told about.
local chapter = require 'filters.chapter'

local errors = {}

local function shell_quote(text)
  return "'" .. text:gsub("'", "'\\''") .. "'"
end

-- One program at a time, across all the chapters being built (and all of
-- one user's builds on this machine): a lock outside the tree, which tup
-- does not track, held by flock (util-linux) for the run of each command.
-- One lock per user: where the kernel protects files in /tmp
-- (fs.protected_regular), another user's lock file could not be opened.
local LOCK = '"/tmp/numerics-book-programs.$(id -u).lock"'
local function run(command)
  local pipe = io.popen('cd ' .. shell_quote(chapter.dir) .. ' && flock ' .. LOCK .. ' sh -c ' .. shell_quote(command))
  local output = pipe:read('a')
  -- Lua 5.3: close() gives how the shell ended ("exit" or "signal") and the number.
  local _, how, status = pipe:close()
  if how == 'exit' and status == 0 then return output end
  return nil, string.format('`%s` (in %s) %s %d; its stderr, if any, is above',
                            command, chapter.dir,
                            how == 'exit' and 'exited with status' or 'was killed by signal',
                            status)
end

function CodeBlock(block)
  if not block.classes:includes('run') then return nil end
  local command, format = block.attributes.cmd, block.attributes.format
  if not command then
    table.insert(errors, chapter.source .. ': a .run block has no cmd="..."')
    return nil
  end
  if format and format ~= 'markdown' then
    table.insert(errors, string.format('`%s`: format="%s" is not "markdown"', command, format))
    return nil
  end
  local output, err = run(command)
  if not output then
    table.insert(errors, err)
    return nil
  end
  if format == 'markdown' then
    return pandoc.read(output, 'markdown').blocks
  end
  return pandoc.CodeBlock(output:gsub('\n+$', ''), pandoc.Attr(block.identifier, { 'output' }))
end

function Pandoc()
  if #errors > 0 then chapter.fail('run', errors) end
end
