-- What the book's filters share. Paths written in a chapter's Markdown (code
-- to include, commands to run, figures) are relative to the chapter's
-- directory, the one holding chapter.md, while pandoc runs in book/.
local chapter = {}

chapter.source = PANDOC_STATE.input_files[1]
chapter.dir = pandoc.path.directory(chapter.source)

-- 'a/b/../c' and 'a//c' both become 'a/c', without asking the file system,
-- so that two spellings of one file compare equal.
function chapter.normalize(path)
  local parts = {}
  for part in path:gmatch('[^/]+') do
    if part == '..' and #parts > 0 and parts[#parts] ~= '..' then
      table.remove(parts)
    elseif part ~= '.' then
      table.insert(parts, part)
    end
  end
  return (path:match('^/') or '') .. table.concat(parts, '/')
end

-- PATH as written in the chapter in directory DIR (by default the chapter
-- being read), as a path from book/.
function chapter.resolve(path, dir)
  return chapter.normalize(pandoc.path.join({dir or chapter.dir, path}))
end

-- The document in the file at PATH, read as FORMAT (by default Markdown).
function chapter.read(path, format)
  local file = assert(io.open(path))
  local text = file:read('a')
  file:close()
  return pandoc.read(text, format or 'markdown')
end

-- Print every error, then stop pandoc without writing its output: the rule
-- fails, and tup shows these lines.
function chapter.fail(filter, errors)
  for _, message in ipairs(errors) do
    io.stderr:write(filter, ': ', message, '\n')
  end
  os.exit(1)
end

-- The pages of the book in reading order: the chapters, from -M
-- chapters="01-cancellation 02-layernorm ...", then the appendices, from -M
-- appendices="how-it-is-made ..." (book/Tupfile.lua). Each has its NAME, its
-- label (01-cancellation is Chapter 1, the first appendix Appendix A), a
-- chapter its number, its page NAME.html, its Markdown source `path`, what
-- the book shows of it `built` (a chapter filtered into build/NAME.json, an
-- appendix as written) and `prefix`, its heading's id, which its ids carry
-- in the EPUB, where every page is in one document.
function chapter.list(meta)
  local list = {}
  for name in pandoc.utils.stringify(meta.chapters):gmatch('%S+') do
    local number = name:match('^0*(%d+)%-')
    if not number then
      chapter.fail('book', { 'chapter directory ' .. name .. ' is not named NN-topic' })
    end
    table.insert(list, { name = name, number = number, label = 'Chapter ' .. number, href = name .. '.html',
                         path = '../chapters/' .. name .. '/chapter.md', built = 'build/' .. name .. '.json',
                         prefix = 'chapter-' .. number })
  end
  local letter = string.byte('A')
  for name in pandoc.utils.stringify(meta.appendices or ''):gmatch('%S+') do
    local path = 'appendix/' .. name .. '.md'
    table.insert(list, { name = name, label = 'Appendix ' .. string.char(letter), href = name .. '.html',
                         path = path, built = path, prefix = 'appendix-' .. string.char(letter):lower() })
    letter = letter + 1
  end
  return list
end

return chapter
