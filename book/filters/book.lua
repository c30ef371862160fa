-- The book around the chapters, from the chapter list that book/Tupfile.lua
-- passes as -M chapters="01-cancellation 02-layernorm ...", in reading order:
--   a chapter page (-M chapter=NAME) gets its number and previous/next links;
--   the index gets its table of contents, at the end of its div .contents;
--   the EPUB is the index's text followed by every chapter.
-- A chapter's number comes from its directory (01-cancellation is Chapter 1),
-- its title from its chapter.md front matter, its page is NAME.html, and the
-- filtered chapter (includes and runs done) is build/NAME.json.
local chapter = require 'filters.chapter'

-- A chapter's Markdown as written (its title is needed before it is built).
local function source(ch)
  local path = '../chapters/' .. ch.name .. '/chapter.md'
  local doc = chapter.read(path)
  if not doc.meta.title then
    chapter.fail('book', { path .. ' has no "title:" in its front matter' })
  end
  return doc
end

local function link(ch)
  return ch and { href = ch.href, number = ch.number, title = source(ch).meta.title }
end

local function heading(ch, doc_title)
  return pandoc.Header(1, { pandoc.Str('Chapter ' .. ch.number .. '.'), pandoc.Space(),
                            table.unpack(doc_title) }, pandoc.Attr('chapter-' .. ch.number))
end

local function chapter_page(doc, chapters, name)
  for i, ch in ipairs(chapters) do
    if ch.name == name then
      doc.meta.number = ch.number
      doc.meta.prev = link(chapters[i - 1])
      doc.meta.next = link(chapters[i + 1])
      return doc
    end
  end
  chapter.fail('book', { name .. ' is not in the chapter list' })
end

-- Chapters and their sections, each a link into its page.
local function contents(chapters)
  local items = {}
  for _, ch in ipairs(chapters) do
    local doc = source(ch)
    local sections = {}
    for _, block in ipairs(doc.blocks) do
      if block.t == 'Header' and block.level == 2 then
        local target = ch.href .. '#' .. block.identifier
        table.insert(sections, { pandoc.Plain({ pandoc.Link(block.content, target) }) })
      end
    end
    local entry = pandoc.Link(heading(ch, doc.meta.title).content, ch.href)
    table.insert(items, { pandoc.Plain({ entry }), pandoc.BulletList(sections) })
  end
  return pandoc.BulletList(items)
end

local function is_contents(block)
  return block.t == 'Div' and block.classes:includes('contents')
end

local function index(doc, chapters)
  return doc:walk({
    Div = function(div)
      if is_contents(div) then div.content:insert(contents(chapters)) end
      return div
    end,
  })
end

-- The EPUB is one document, where every chapter has its "exercises" and
-- "references": the ids of Chapter N become chapter-N-id, and the links into
-- the pages of the book (#id, NAME.html#id, NAME.html) follow them, so that
-- no link lands in another chapter's section of the same name.
local function into_one_document(blocks, chapters, own)  -- own: N, or nil
  local numbers = {}
  for _, ch in ipairs(chapters) do numbers[ch.name] = ch.number end
  local function prefixed(number, id) return number and 'chapter-' .. number .. '-' .. id or id end
  local function rename(element)
    if element.identifier and element.identifier ~= '' then
      element.identifier = prefixed(own, element.identifier)
      return element
    end
  end
  local function retarget(link)
    local page, id = link.target:match('^([%w_.-]+)%.html#?(.*)$')
    if page and id == '' then
      link.target = numbers[page] and '#chapter-' .. numbers[page] or '#'
    elseif page then
      link.target = '#' .. prefixed(numbers[page], id)
    elseif link.target:match('^#') then
      link.target = '#' .. prefixed(own, link.target:sub(2))
    end
    rename(link)
    return link
  end
  return pandoc.walk_block(pandoc.Div(blocks), { Block = rename, Inline = rename, Link = retarget }).content
end

local function epub(doc, chapters)
  local blocks = { pandoc.Header(1, doc.meta.title) }
  for _, block in ipairs(doc.blocks) do
    if not is_contents(block) then
      table.insert(blocks, block)
    end
  end
  blocks = into_one_document(blocks, chapters, nil)
  for _, ch in ipairs(chapters) do
    table.insert(blocks, heading(ch, source(ch).meta.title))
    local chapter_blocks = chapter.read('build/' .. ch.name .. '.json', 'json').blocks
    for _, block in ipairs(into_one_document(chapter_blocks, chapters, ch.number)) do
      table.insert(blocks, block)
    end
  end
  doc.meta.title = doc.meta['book-title']
  return pandoc.Pandoc(blocks, doc.meta)
end

function Pandoc(doc)
  local chapters = chapter.list(doc.meta)
  if doc.meta.chapter then
    return chapter_page(doc, chapters, pandoc.utils.stringify(doc.meta.chapter))
  elseif FORMAT:match('epub') then
    return epub(doc, chapters)
  end
  return index(doc, chapters)
end
