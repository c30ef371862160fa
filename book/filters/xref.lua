-- Cross-references, made links and checked. Runs after filters/book.lua,
-- with the same page lists (-M chapters=... -M appendices=...).
--
-- "Chapter 2" (and "Chapters 1 and 3") in the prose becomes a link to that
-- chapter's page; a number that is no chapter of the book fails the build.
-- Every link inside the book must land: "#id" on an id of this page,
-- "NAME.html" on a page of the book (a chapter, an appendix or index.html), and
-- "NAME.html#id" on an id of that page's source. A link that does not fails
-- the build, naming the file and the link, so a renamed heading cannot leave
-- a dead reference behind.
--
-- In the EPUB every page is in one document, a chapter's heading
-- #chapter-N, and filters/book.lua has already turned every link into a
-- "#id" of it.
local answers = require 'filters.answers'
local chapter = require 'filters.chapter'

local pages, chapters, by_number, by_name = {}, {}, {}, {}
local epub = FORMAT:match('epub') ~= nil
local source = PANDOC_STATE.input_files[1]
local errors = {}

local function problem(text)
  table.insert(errors, string.format('%s: %s', source, text))
end

-- Every id an element of DOC carries (headers, divs, spans, code blocks...).
local function ids_of(doc)
  local ids = { TOC = true }  -- the page's table of contents (template.html)
  local function note(element)
    if element.identifier and element.identifier ~= '' then ids[element.identifier] = true end
  end
  doc:walk({ Block = note, Inline = note })
  return ids
end

-- The ids of a page of the book: those of its source, and those that
-- filters/answers.lua adds (exercises, answers).
local page_ids = {}
local function ids_of_page(name)
  if not page_ids[name] then
    if name == 'index' then
      page_ids[name] = ids_of(chapter.read('index.md'))
    else
      local page = by_name[name]
      page_ids[name] = ids_of(chapter.read(page.path))
      local read = function(p) return chapter.read(p.path) end
      for id in pairs(answers.ids_of(page, pages, read)) do page_ids[name][id] = true end
    end
  end
  return page_ids[name]
end

local function chapter_link(ch, content)
  return pandoc.Link(content, epub and '#chapter-' .. ch.number or ch.href)
end

-- The chapter a token such as "2", "2's", "2," or "2)" names, and the rest.
local function numbered(inline)
  if inline and inline.t == 'Str' then
    local number, rest = inline.text:match('^(%d+)(.*)$')
    if number then return number, rest end
  end
end

local function is_space(inline)
  return inline and (inline.t == 'Space' or inline.t == 'SoftBreak')
end

-- "Chapter N" at position I of INLINES: the link and the position after it.
local function link_chapter(inlines, i, out)
  local number, rest = numbered(inlines[i + 2])
  local ch = by_number[number]
  if not ch then
    problem(string.format('"Chapter %s": there is no Chapter %s (the book has Chapters %s to %s)',
                          number, number, chapters[1].number, chapters[#chapters].number))
    return i + 1
  end
  table.insert(out, chapter_link(ch, { inlines[i], pandoc.Space(), pandoc.Str(number) }))
  if rest ~= '' then table.insert(out, pandoc.Str(rest)) end
  return i + 3
end

-- "Chapters N, M and P": each number its own link.
local function link_chapters(inlines, i, out)
  table.insert(out, inlines[i])
  i = i + 1
  while is_space(inlines[i]) do
    local number, rest = numbered(inlines[i + 1])
    local word = inlines[i + 1] and inlines[i + 1].t == 'Str' and inlines[i + 1].text
    if number then
      table.insert(out, inlines[i])
      local ch = by_number[number]
      if not ch then
        problem(string.format('"Chapters ... %s": there is no Chapter %s', number, number))
        table.insert(out, inlines[i + 1])
      else
        table.insert(out, chapter_link(ch, { pandoc.Str(number) }))
        if rest ~= '' then table.insert(out, pandoc.Str(rest)) end
      end
      i = i + 2
    elseif word == 'and' or word == 'or' or word == 'to' then
      table.insert(out, inlines[i])
      table.insert(out, inlines[i + 1])
      i = i + 2
    else
      break
    end
  end
  return i
end

local function link_chapter_numbers(inlines)
  local out, i = pandoc.List(), 1
  while i <= #inlines do
    local inline = inlines[i]
    local word = inline.t == 'Str' and inline.text
    if word == 'Chapter' and is_space(inlines[i + 1]) and numbered(inlines[i + 2]) then
      i = link_chapter(inlines, i, out)
    elseif word == 'Chapters' and is_space(inlines[i + 1]) and numbered(inlines[i + 2]) then
      i = link_chapters(inlines, i, out)
    else
      table.insert(out, inline)
      i = i + 1
    end
  end
  return out
end

-- Checks a link of this page.
local function check_link(link, own_ids)
  local target = link.target
  if target:match('^%a[%w+.-]*:') then return nil end  -- https:, mailto:
  local page, id = target:match('^([%w_.-]+)%.html#?(.*)$')
  if not page then
    id = target:match('^#(.+)$')
    if not id then return nil end  -- a file beside the page (a figure)
    if not own_ids[id] then problem(string.format('link to "%s": no such id on this page', target)) end
    return nil
  end
  if page ~= 'index' and not by_name[page] then
    problem(string.format('link to "%s": %s.html is no page of the book', target, page))
  elseif id ~= '' and not ids_of_page(page)[id] then
    problem(string.format('link to "%s": %s.html has no id "%s"', target, page, id))
  end
  return nil
end

function Pandoc(doc)
  pages = chapter.list(doc.meta)
  for _, page in ipairs(pages) do
    by_name[page.name] = page
    if page.number then
      by_number[page.number] = page
      table.insert(chapters, page)
    end
  end
  if doc.meta.page then
    source = by_name[pandoc.utils.stringify(doc.meta.page)].path
  end
  doc = doc:walk({
    traverse = 'topdown',
    Header = function(header) return header, false end,  -- headings stay text
    Link = function(link) return link, false end,        -- so does a link's text
    Inlines = link_chapter_numbers,
  })
  local own_ids = ids_of(doc)
  doc = doc:walk({ Link = function(link) return check_link(link, own_ids) end })
  if #errors > 0 then chapter.fail('xref', errors) end
  return doc
end
