-- gpuroute's emulation of osrm-extract's Lua bindings (profile API version 4).
--
-- Loaded by gpuroute.io.lua_profile into a fresh Lua state before the user's profile. It defines the
-- globals osrm-extract defines (src/extractor/scripting_environment_lua.cpp: the sol2 usertypes, enums
-- and helper functions) and returns a table of driver functions that Python calls in bulk: one Lua
-- call runs process_way over many ways, the inputs arrive as flat varargs and the results leave as flat
-- return values (no Lua object is created from Python per way).
--
-- Everything here mirrors OSRM 26.10 (the osrm-bindings wheel's osrm-extract, Lua 5.5). Where a
-- binding cannot be emulated it is refused by name with an error starting "gpuroute-unsupported:".

local py = ...                       -- Python callbacks: duration_is_valid, parse_duration, way_nodes, turn_legs
local type, error, select, tostring, tonumber = type, error, select, tostring, tonumber
local pairs, ipairs, next, setmetatable, getmetatable = pairs, ipairs, next, setmetatable, getmetatable
local mtype, mfloor, mmin, mmax, mhuge = math.type, math.floor, math.min, math.max, math.huge
local spack, sunpack, sfind, ssub, sgsub = string.pack, string.unpack, string.find, string.sub, string.gsub
local concat, sort, unpack = table.concat, table.sort, table.unpack
local xpcall, traceback, getinfo = xpcall, debug.traceback, debug.getinfo

local RUNTIME_SOURCE = "=gpuroute-lua-runtime"
local M = {}

-- ------------------------------------------------------------------------------------------ errors
local function unsupported(what, why)
  error("gpuroute-unsupported: " .. what .. " is not supported by gpuroute's Lua profile runtime ("
        .. why .. ")", 3)
end

local function unsupported_object(what, why)
  return setmetatable({}, {
    __index = function() unsupported(what, why) end,
    __newindex = function() unsupported(what, why) end,
    __call = function() unsupported(what, why) end,
  })
end

local function bad_field(obj, k)
  error("gpuroute: " .. obj .. " has no writable field '" .. tostring(k) .. "' (osrm-extract's " .. obj
        .. " has no such member)", 3)
end

-- message handler: the message, the first frame of the profile's own code (file and line) and a traceback
local function handler(e)
  local msg = type(e) == "string" and e or tostring(e)
  local src, line
  for level = 2, 64 do
    local info = getinfo(level, "Sl")
    if not info then break end
    if info.what ~= "C" and info.source ~= RUNTIME_SOURCE then
      src, line = info.source, info.currentline
      break
    end
  end
  return {msg, src or false, line or false, traceback(msg, 2)}
end

-- ------------------------------------------------------------------------------------------ conversions
-- sol2's conversions into C++ members, as osrm-extract 26.10 does them (checked against its binary):
-- a double takes lua_tonumber (numeric strings convert, anything else is 0) and reads back as a float
local function todouble(v)
  local t = type(v)
  if t == "number" then return v + 0.0 end
  if t == "string" then
    local n = tonumber(v)
    if n then return n + 0.0 end
  end
  return 0.0
end

-- an integer takes a Lua integer as is, else llround(lua_tonumber(v)); then static_cast to an unsigned
-- of `bits` bits (the member's type or bit-field)
local function toint(v, bits)
  if mtype(v) ~= "integer" then
    local n = todouble(v)
    if n ~= n or n == mhuge or n == -mhuge then
      v = 0
    elseif n >= 0 then
      v = mfloor(n + 0.5)
    else
      v = -mfloor(-n + 0.5)
    end
    v = math.tointeger(v) or 0
  end
  if bits then v = v % (1 << bits) end
  return v
end

-- a const char* setter: a string, a number's Lua text, anything else (nil, a boolean) clears the string
local function tostr(v)
  local t = type(v)
  if t == "string" then return v end
  if t == "number" then return tostring(v) end
  return ""
end

local function checkstr(v, what)
  local t = type(v)
  if t == "string" then return v end
  if t == "number" then return tostring(v) end
  error("gpuroute: " .. what .. " expects a string, not " .. t, 3)
end

local function f32(x)  -- C++ float
  return (sunpack("f", spack("f", x)))
end

-- ------------------------------------------------------------------------------------------ enums
mode = {inaccessible = 0, driving = 1, cycling = 2, walking = 3, ferry = 4, train = 5, pushing_bike = 6,
        steps_up = 8, steps_down = 9, river_up = 10, river_down = 11, route = 12}

road_priority_class = {motorway = 0, motorway_link = 1, trunk = 2, trunk_link = 3, primary = 4,
                       primary_link = 5, secondary = 6, secondary_link = 7, tertiary = 8, tertiary_link = 9,
                       main_residential = 10, side_residential = 11, alley = 12, parking = 13,
                       link_road = 14, unclassified = 15, bike_path = 16, foot_path = 18, connectivity = 31}

item_type = {node = 1, way = 2, relation = 3}

traffic_lights = {none = 0, direction_all = 3, direction_forward = 1, direction_reverse = 2}

obstacle_type = {none = 0, barrier = 0x1, traffic_signals = 0x2, stop = 0x4, stop_minor = 0x200,
                 give_way = 0x8, crossing = 0x10, traffic_calming = 0x20, mini_roundabout = 0x40,
                 turning_loop = 0x80, turning_circle = 0x100, gate = 0x400}

obstacle_direction = {none = 0, forward = 1, backward = 2, both = 3}

local TYPE_ALL = 0xFFFF

-- ------------------------------------------------------------------------------------------ helper functions
function durationIsValid(s)
  return py.duration_is_valid(checkstr(s, "durationIsValid"))
end

function parseDuration(s)
  return py.parse_duration(checkstr(s, "parseDuration"))
end

local function pattern_escape(s)
  return (sgsub(s, "[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0"))
end

-- include/extractor/extraction_helper_functions.hpp
function canonicalizeStringList(strlist, delim)
  strlist = checkstr(strlist, "canonicalizeStringList")
  delim = checkstr(delim, "canonicalizeStringList")
  if delim ~= "" then
    strlist = sgsub(strlist, pattern_escape(delim), (sgsub(delim, "%%", "%%%%")) .. " ")
  end
  -- std::unique over adjacent whitespace: a run of whitespace keeps its first character
  strlist = sgsub(strlist, "(%s)%s+", "%1")
  return strlist
end

-- boost::tokenizer with char_separator("|", "", keep_empty_tokens)
local function lane_tokens(s)
  local out = {}
  if s == "" then return out end
  local start = 1
  while true do
    local i = sfind(s, "|", start, true)
    if not i then
      out[#out + 1] = ssub(s, start)
      return out
    end
    out[#out + 1] = ssub(s, start, i - 1)
    start = i + 1
  end
end

-- include/guidance/parsing_toolkit.hpp
function trimLaneString(lane_string, count_left, count_right)
  lane_string = checkstr(lane_string, "trimLaneString")
  count_left = toint(count_left, 32)
  if count_left >= 1 << 31 then count_left = count_left - (1 << 32) end
  count_right = toint(count_right, 32)
  if count_right >= 1 << 31 then count_right = count_right - (1 << 32) end
  if count_left > 0 then
    local sane = count_left < #lane_string
    for i = 1, count_left do
      if ssub(lane_string, i, i) ~= "|" then sane = false break end
    end
    if sane then lane_string = ssub(lane_string, count_left + 1) end
  end
  if count_right > 0 then
    local sane = count_right < #lane_string
    local n = #lane_string
    for i = n, mmax(n - count_right + 1, 1), -1 do
      if ssub(lane_string, i, i) ~= "|" then sane = false break end
    end
    if sane then lane_string = ssub(lane_string, 1, n - count_right) end
  end
  return lane_string
end

function applyAccessTokens(lane_string, access_tokens)
  lane_string = checkstr(lane_string, "applyAccessTokens")
  access_tokens = checkstr(access_tokens, "applyAccessTokens")
  local tokens, access = lane_tokens(lane_string), lane_tokens(access_tokens)
  if #tokens ~= #access then return lane_string end
  local out = {}
  for i = 1, #tokens do
    if access[i] == "yes" then out[#out + 1] = tokens[i] end
  end
  return concat(out, "|")
end

function is_true(v)
  if v == nil then return false end
  v = checkstr(v, "is_true")
  return v == "yes" or v == "true" or v == "1"
end

function is_false(v)
  if v == nil then return false end
  v = checkstr(v, "is_false")
  return v == "no" or v == "false" or v == "0"
end

-- ------------------------------------------------------------------------------------------ unsupported globals
-- `properties` is the API version 0/1 global; osrm-extract clears it for later versions after loading.
properties = unsupported_object("the global 'properties' (profile API versions 0 and 1)",
                                "gpuroute runs API version 4 profiles; use setup()'s properties table")
area_manager = unsupported_object("area_manager (pedestrian area meshing, OSRM's docs/areas.md)",
                                  "open areas are not meshed")
vector = unsupported_object("the 'vector' usertype (profile API version 1)", "API version 4 only")
local RASTER = unsupported_object("raster (raster sources: raster:load, raster:query, raster:interpolate)",
                                  "no raster data can be attached to the graph")

-- ------------------------------------------------------------------------------------------ Location, NodeRef
-- osmium::Location: {lon, lat}, false where the loader gave no coordinates
local Location = {}
Location.__index = Location
Location.__name = "Location"
local function invalid_location()
  error("gpuroute: invalid location (osmium::invalid_location: the loader gave no coordinates for"
        .. " this node)", 3)
end
function Location.lon(self) if not self[1] then invalid_location() end return self[1] end
function Location.lat(self) if not self[2] then invalid_location() end return self[2] end
function Location.valid(self) return self[1] ~= false end

-- osmium::NodeRef: {id, lon, lat}; osrm-extract 26.10 gives ways their node locations
local NodeRef = {}
NodeRef.__index = NodeRef
NodeRef.__name = "NodeRef"
function NodeRef.id(self) return self[1] end
function NodeRef.location(self) return setmetatable({self[2], self[3]}, Location) end

-- ------------------------------------------------------------------------------------------ OSM objects
local function object_methods(name, state, otype)
  local m = {}
  function m.id(self) return state.id end
  function m.version(self) return 0 end   -- osrm-extract reads without metadata (no --with-osm-metadata)
  function m.type(self) return otype end
  function m.get_value_by_key(self, key, default)
    if type(key) ~= "string" then key = checkstr(key, name .. ":get_value_by_key") end
    local v = state.tags[key]
    if v == nil then v = default end
    if v == "" then return nil end
    return v
  end
  function m.has_key(self, key)
    key = checkstr(key, name .. ":has_key")
    return state.tags[key] ~= nil
  end
  function m.has_tag(self, key, value)
    key = checkstr(key, name .. ":has_tag")
    return state.tags[key] == value
  end
  function m.has_true_tag(self, key)
    local v = state.tags[checkstr(key, name .. ":has_true_tag")]
    return v == "yes" or v == "true" or v == "1"
  end
  function m.has_false_tag(self, key)
    local v = state.tags[checkstr(key, name .. ":has_false_tag")]
    return v == "no" or v == "false" or v == "0"
  end
  -- no --location-dependent-data: osrm-extract 26.10 answers with the key itself (its binding returns
  -- sol::object(state), the value on top of the Lua stack, which is the key argument)
  function m.get_location_tag(self, key)
    return checkstr(key, name .. ":get_location_tag")
  end
  return m
end

local function readonly_object(name, methods)
  return setmetatable({}, {
    __index = methods,
    __newindex = function(_, k) bad_field(name, k) end,
    __name = name,
  })
end

-- the node being processed (tags: values non-empty)
local NODE = {id = 0, tags = {}, lon = nil, lat = nil}
local node_methods = object_methods("Node", NODE, item_type.node)
function node_methods.location(self)
  local lon, lat = NODE.lon, NODE.lat
  if lon == nil or lat == nil then lon, lat = false, false end
  return setmetatable({lon, lat}, Location)
end
local Node = readonly_object("Node", node_methods)

-- the way being processed
local WAY = {id = 0, tags = {}, batch = 0, lht = false}
local way_methods = object_methods("Way", WAY, item_type.way)
-- the way's NodeRefs, asked of the loader the first time the profile needs them (flat: id, lon, lat)
local function way_nodes()
  local refs = WAY.nodes
  if refs == nil then
    local ok, flat = pcall(py.way_nodes, WAY.batch)
    if not ok then error("gpuroute: " .. tostring(flat), 3) end
    refs = {}
    for i = 1, #flat, 3 do refs[#refs + 1] = setmetatable({flat[i], flat[i + 1], flat[i + 2]}, NodeRef) end
    WAY.nodes = refs
  end
  return refs
end
function way_methods.get_nodes(self)
  local refs, out = way_nodes(), {}
  for i = 1, #refs do out[i] = refs[i] end
  return out
end
function way_methods.size(self) return #way_nodes() end
function way_methods.is_closed(self)
  local refs = way_nodes()
  return #refs > 0 and refs[1][1] == refs[#refs][1]
end
-- OSRM 26.10: the driving side index's answer for this way (the loader supplies it)
function way_methods.is_left_hand_traffic(self) return WAY.lht end
local Way = readonly_object("Way", way_methods)

-- ------------------------------------------------------------------------------------------ relations
local RELATIONS = {}                          -- id -> relation object
local PARENTS = {{}, {}, {}}                   -- item type -> member id -> {relation ids}
local EMPTY_LIST = setmetatable({}, {__newindex = function() error("gpuroute: read-only list", 2) end})

local Relation = {}
Relation.__index = Relation
Relation.__name = "ExtractionRelation"
Relation.__newindex = function(_, k) bad_field("ExtractionRelation", k) end
function Relation.id(self) return self._id end
function Relation.version(self) return 0 end
function Relation.type(self) return item_type.relation end
function Relation.get_value_by_key(self, key, default)
  local v = self._tags[checkstr(key, "ExtractionRelation:get_value_by_key")]
  if v == nil then return default end
  return v
end
function Relation.has_key(self, key)
  local v = self._tags[checkstr(key, "ExtractionRelation:has_key")]
  return v ~= nil and v ~= ""
end
function Relation.has_tag(self, key, value)
  return self._tags[checkstr(key, "ExtractionRelation:has_tag")] == value
end
function Relation.has_true_tag(self, key)
  local v = self._tags[checkstr(key, "ExtractionRelation:has_true_tag")]
  return v == "yes" or v == "true" or v == "1"
end
function Relation.has_false_tag(self, key)
  local v = self._tags[checkstr(key, "ExtractionRelation:has_false_tag")]
  return v == "no" or v == "false" or v == "0"
end
function Relation.get_role(self, obj)
  local id, t = obj:id(), obj:type()
  for _, m in ipairs(self._members) do
    if m._ref == id and m._type == t then return m._role end
  end
  return nil
end
function Relation.get_members(self)
  local out = {}
  for i, m in ipairs(self._members) do out[i] = m end
  return out
end

local RelationMember = {}
RelationMember.__index = RelationMember
RelationMember.__name = "RelationMember"
function RelationMember.ref(self) return self._ref end
function RelationMember.type(self) return self._type end
function RelationMember.role(self) return self._role end

local relations_methods = {}
function relations_methods.get_relations(self, obj)
  local by_type = PARENTS[obj:type()]
  return (by_type and by_type[obj:id()]) or EMPTY_LIST
end
function relations_methods.relation(self, id)
  local r = RELATIONS[id]
  if r == nil then
    error("gpuroute: Can't find relation data for " .. tostring(id)
          .. " (osrm-extract keeps the relations whose type is in profile.relation_types)", 2)
  end
  return r
end
local Relations = readonly_object("ExtractionRelationContainer", relations_methods)

-- flat: id, ntags, k, v, ..., nmembers, type, ref, role, ...
function M.clear_relations()
  RELATIONS, PARENTS = {}, {{}, {}, {}}
end

function M.add_relations(...)
  local a, n = {...}, select("#", ...)
  local i = 1
  while i <= n do
    local id, nt = a[i], a[i + 1]
    i = i + 2
    local tags = {}
    for j = i, i + 2 * nt - 1, 2 do tags[a[j]] = a[j + 1] end
    i = i + 2 * nt
    local nm = a[i]
    i = i + 1
    local members = {}
    for j = 1, nm do
      local mt, ref, role = a[i], a[i + 1], a[i + 2]
      i = i + 3
      members[j] = setmetatable({_type = mt, _ref = ref, _role = role}, RelationMember)
      local by_id = PARENTS[mt]
      if by_id then
        local list = by_id[ref]
        if list == nil then list = {} by_id[ref] = list end
        list[#list + 1] = id
      end
    end
    if RELATIONS[id] == nil then
      RELATIONS[id] = setmetatable({_id = id, _tags = tags, _members = members}, Relation)
    end
  end
end

-- ------------------------------------------------------------------------------------------ obstacles
local OBSTACLE_TYPES, OBSTACLE_DIRECTIONS = {}, {}
for _, v in pairs(obstacle_type) do OBSTACLE_TYPES[v] = true end
for _, v in pairs(obstacle_direction) do OBSTACLE_DIRECTIONS[v] = true end

local ObstacleMT = {
  __index = function(self, k) return self._v[k] end,
  __newindex = function(_, k) error("gpuroute: Obstacle." .. tostring(k) .. " is read-only", 2) end,
  __name = "Obstacle",
}

local function new_obstacle(t, d, duration, weight)
  return setmetatable({_v = {type = t, direction = d, duration = duration, weight = weight}}, ObstacleMT)
end

-- the constructors of include/extractor/obstacles.hpp: (type), (type, direction), (type, direction,
-- duration, weight); duration (s) and weight are C++ floats
Obstacle = {}
function Obstacle.new(...)
  local n = select("#", ...)
  local t, d, duration, weight = ...
  if n ~= 1 and n ~= 2 and n ~= 4 then
    error("gpuroute: Obstacle.new takes (type), (type, direction) or (type, direction, duration, weight);"
          .. " got " .. n .. " arguments", 2)
  end
  t = toint(t)
  if not OBSTACLE_TYPES[t] then error("gpuroute: Obstacle.new: " .. t .. " is not an obstacle_type", 2) end
  d = n >= 2 and toint(d) or 0
  if not OBSTACLE_DIRECTIONS[d] then
    error("gpuroute: Obstacle.new: " .. d .. " is not an obstacle_direction", 2)
  end
  duration = n == 4 and f32(todouble(duration)) or 0.0
  weight = n == 4 and f32(todouble(weight)) or 0.0
  return new_obstacle(t, d, duration, weight)
end

local PHASE = "load"            -- load | node | way | turn | segment
local NODE_OBSTACLES = {}       -- obstacles added while processing the current node batch (flat)
local OBST = nil                -- after prepare: node id -> list of {from or false, obstacle}

-- an obstacle at the node being processed (NODE.batch: its index in the current batch)
local function add_obstacle(t, d, duration, weight)
  local o = NODE_OBSTACLES
  local k = #o
  o[k + 1], o[k + 2], o[k + 3], o[k + 4], o[k + 5] = NODE.batch, t, d, duration, weight
end

local function obstacles_get(from, to, types)
  local list = OBST[to]
  local out = {}
  if list == nil then return out end
  for i = 1, #list do
    local e = list[i]
    local f = e[1]
    if (from == nil or f == false or f == from) and (e[2].type & types) ~= 0 then
      out[#out + 1] = e[2]
    end
  end
  return out
end

local function need_prepared(what)
  if OBST == nil then
    error("gpuroute: obstacle_map:" .. what .. " is only available in process_turn and process_segment"
          .. " (osrm-extract fills the obstacle map while it processes the nodes and sorts it after;"
          .. " call LuaProfile.prepare_obstacles first)", 3)
  end
end

local obstacle_map_methods = {}
function obstacle_map_methods.add(self, node, obstacle)
  if PHASE ~= "node" or node ~= Node then
    error("gpuroute: obstacle_map:add(node, obstacle) takes the node being processed, in process_node", 2)
  end
  if getmetatable(obstacle) ~= ObstacleMT then
    error("gpuroute: obstacle_map:add: the second argument must be an Obstacle (Obstacle.new(...))", 2)
  end
  local v = obstacle._v
  add_obstacle(v.type, v.direction, v.duration, v.weight)
end
-- get(to), get(from, to), get(from, to, type): the obstacles at `to` met when coming from `from`
function obstacle_map_methods.get(self, a, b, c)
  need_prepared("get")
  if b == nil then return obstacles_get(nil, a, TYPE_ALL) end
  return obstacles_get(a, b, c == nil and TYPE_ALL or toint(c))
end
function obstacle_map_methods.any(self, a, b, c)
  need_prepared("any")
  if b == nil then
    local list = OBST[a]
    return list ~= nil and #list > 0
  end
  return #obstacles_get(a, b, c == nil and TYPE_ALL or toint(c)) > 0
end
obstacle_map = readonly_object("ObstacleMap", obstacle_map_methods)

-- flat: to, from (nil: from anywhere), type, direction, duration, weight, ...
function M.clear_obstacles()
  OBST = {}
end

function M.add_obstacles(...)
  local a, n = {...}, select("#", ...)
  for i = 1, n, 6 do
    local to = a[i]
    local list = OBST[to]
    if list == nil then list = {} OBST[to] = list end
    local from = a[i + 1]
    if from == nil then from = false end
    list[#list + 1] = {from, new_obstacle(a[i + 2], a[i + 3], a[i + 4], a[i + 5])}
  end
end

-- ------------------------------------------------------------------------------------------ ResultNode
local TRAFFIC_SIGNAL_PENALTY = 0.0
local ResultNode = setmetatable({}, {
  -- osrm-extract's ResultNode has two write-only properties
  __index = function(_, k)
    if k == "traffic_lights" or k == "barrier" then
      error("gpuroute: ResultNode." .. k .. " cannot be read (a write-only property in osrm-extract)", 2)
    end
    return nil
  end,
  __newindex = function(_, k, v)
    if k == "traffic_lights" then
      if mtype(v) ~= nil then
        local d = toint(v)
        if not OBSTACLE_DIRECTIONS[d] then
          error("gpuroute: ResultNode.traffic_lights: " .. tostring(v) .. " is not a traffic_lights value", 2)
        end
        add_obstacle(obstacle_type.traffic_signals, d, TRAFFIC_SIGNAL_PENALTY, 0.0)
      elseif v == true then
        add_obstacle(obstacle_type.traffic_signals, obstacle_direction.both, TRAFFIC_SIGNAL_PENALTY, 0.0)
      end
    elseif k == "barrier" then
      if v == true then add_obstacle(obstacle_type.barrier, obstacle_direction.both, 0.0, 0.0) end
    else
      bad_field("ResultNode", k)
    end
  end,
  __name = "ResultNode",
})

-- ------------------------------------------------------------------------------------------ ResultWay
local R, RC = {}, {}   -- the current way's result and road classification (fields set so far)

local RC_DEFAULTS = {motorway_class = false, link_class = false, may_be_ignored = false,
                     road_priority_class = road_priority_class.connectivity, num_lanes = 0}
local RoadClassification = setmetatable({}, {
  __index = function(_, k)
    local v = RC[k]
    if v == nil then v = RC_DEFAULTS[k] end
    -- the getter is IsMotorwayClass(): a motorway link is not of the motorway class
    if k == "motorway_class" and v then v = not RC.link_class end
    return v
  end,
  __newindex = function(_, k, v)
    if k == "motorway_class" or k == "link_class" or k == "may_be_ignored" then
      RC[k] = not not v
    elseif k == "road_priority_class" then
      RC[k] = toint(v, 5)
    elseif k == "num_lanes" then
      RC[k] = toint(v, 8)
    else
      bad_field("RoadClassification", k)
    end
  end,
  __name = "RoadClassification",
})

local WAY_DEFAULTS = {
  forward_speed = -1.0, backward_speed = -1.0, forward_rate = -1.0, backward_rate = -1.0,
  duration = -1.0, weight = -1.0,
  name = "", forward_ref = "", backward_ref = "", pronunciation = "", destinations = "", exits = "",
  turn_lanes_forward = "", turn_lanes_backward = "",
  forward_mode = 0, backward_mode = 0,
  roundabout = false, circular = false, is_startpoint = true, forward_restricted = false,
  backward_restricted = false, is_left_hand_driving = false,
  highway_turn_classification = 0, access_turn_classification = 0,
}
local WAY_KIND = {
  forward_speed = "d", backward_speed = "d", forward_rate = "d", backward_rate = "d", duration = "d",
  weight = "d",
  name = "s", forward_ref = "s", backward_ref = "s", pronunciation = "s", destinations = "s", exits = "s",
  turn_lanes_forward = "s", turn_lanes_backward = "s",
  forward_mode = "m", backward_mode = "m",
  roundabout = "b", circular = "b", is_startpoint = "b", forward_restricted = "b", backward_restricted = "b",
  is_left_hand_driving = "b",
  highway_turn_classification = "u4", access_turn_classification = "u4",
  ref = "ref", road_classification = "rc", forward_classes = "c", backward_classes = "c",
}

-- forward_classes / backward_classes: std::unordered_map<std::string, bool>
local CLASSES_MT = {__newindex = function(t, k, v) rawset(t, k, not not v) end}

local ResultWay = setmetatable({}, {
  __index = function(_, k)
    local v = R[k]
    if v ~= nil then return v end
    local kind = WAY_KIND[k]
    if kind == "c" then
      v = setmetatable({}, CLASSES_MT)
      R[k] = v
      return v
    elseif kind == "ref" then
      return R.forward_ref or ""
    elseif kind == "rc" then
      return RoadClassification
    end
    return WAY_DEFAULTS[k]
  end,
  __newindex = function(_, k, v)
    local kind = WAY_KIND[k]
    if kind == "d" then
      R[k] = todouble(v)
    elseif kind == "s" then
      R[k] = tostr(v)
    elseif kind == "b" then
      R[k] = not not v
    elseif kind == "m" then
      R[k] = toint(v, 4)
    elseif kind == "u4" then
      R[k] = toint(v, 4)
    elseif kind == "ref" then
      local s = tostr(v)
      R.forward_ref, R.backward_ref = s, s
    elseif kind == "c" then
      if type(v) ~= "table" then error("gpuroute: ResultWay." .. k .. " must be a table", 2) end
      local copy = setmetatable({}, CLASSES_MT)
      for ck, cv in pairs(v) do copy[ck] = cv end
      R[k] = copy
    elseif kind == "rc" then
      if v ~= RoadClassification then
        error("gpuroute: ResultWay.road_classification must be a RoadClassification", 2)
      end
    else
      bad_field("ResultWay", k)
    end
  end,
  __name = "ResultWay",
})

-- class names whose flag is set, sorted, joined by ","; osrm-extract checks every name ([A-Za-z0-9])
local function classes_string(c, what)
  if c == nil or next(c) == nil then return "" end
  local names = {}
  for k, v in pairs(c) do
    if type(k) ~= "string" or sfind(k, "[^%w]") then
      error("gpuroute-class: Invalid class name " .. tostring(k) .. " in result." .. what
            .. " (only [a-Z0-9] allowed)", 0)
    end
    if v then names[#names + 1] = k end
  end
  sort(names)
  return concat(names, ",")
end

-- ------------------------------------------------------------------------------------------ turns
local T = {}                     -- the current turn's fields
local TURN_READ = {
  "angle", "number_of_roads", "is_u_turn", "is_left_hand_driving", "from", "via", "to",
  "source_restricted", "source_mode", "source_is_motorway", "source_is_link", "source_number_of_lanes",
  "source_highway_turn_classification", "source_access_turn_classification", "source_speed",
  "source_priority_class", "source_is_roundabout",
  "target_restricted", "target_mode", "target_is_motorway", "target_is_link", "target_number_of_lanes",
  "target_highway_turn_classification", "target_access_turn_classification", "target_speed",
  "target_priority_class", "target_is_roundabout",
}
local N_TURN = #TURN_READ
local TURN_LEGS = {source_road = 0, target_road = 1, roads_on_the_right = 2, roads_on_the_left = 3}
local TURN_FIELDS = {has_traffic_light = true, duration = true, weight = true}
for _, k in ipairs(TURN_READ) do TURN_FIELDS[k] = true end

local ExtractionTurn = setmetatable({}, {
  __index = function(_, k)
    local v = T[k]
    if v ~= nil then return v end
    local leg = TURN_LEGS[k]
    if leg ~= nil then
      v = py.turn_legs(T._batch, leg)
      T[k] = v
      return v
    end
    return nil
  end,
  __newindex = function(_, k, v)
    if k == "duration" or k == "weight" then
      T[k] = todouble(v)
    elseif TURN_FIELDS[k] or TURN_LEGS[k] then
      error("gpuroute: ExtractionTurn." .. k .. " is read-only (a const member in osrm-extract)", 2)
    else
      bad_field("ExtractionTurn", k)
    end
  end,
  __name = "ExtractionTurn",
})

function M.make_leg(is_restricted, is_motorway, is_link, number_of_lanes, highway_turn_classification,
                    access_turn_classification, speed, distance, priority_class, is_incoming, is_outgoing)
  return {is_restricted = is_restricted, is_motorway = is_motorway, is_link = is_link,
          number_of_lanes = number_of_lanes, highway_turn_classification = highway_turn_classification,
          access_turn_classification = access_turn_classification, speed = speed, distance = distance,
          priority_class = priority_class, is_incoming = is_incoming, is_outgoing = is_outgoing}
end

function M.list(...)
  return {...}
end

-- ------------------------------------------------------------------------------------------ segments
local S = {}
local Coordinate = {}
Coordinate.__index = Coordinate
Coordinate.__newindex = function(_, k) error("gpuroute: Coordinate." .. tostring(k) .. " is read-only", 2) end
Coordinate.__name = "Coordinate"
local SegmentFlags = setmetatable({}, {
  __index = function(_, k) return S.flags[k] end,
  __newindex = function(_, k) error("gpuroute: NodeBasedEdgeClassification." .. tostring(k)
                                    .. " is read-only", 2) end,
  __name = "NodeBasedEdgeClassification",
})
local ExtractionSegment = setmetatable({}, {
  __index = function(_, k)
    if k == "flags" then return SegmentFlags end
    return S[k]
  end,
  __newindex = function(_, k, v)
    if k == "duration" or k == "weight" then
      S[k] = todouble(v)
    elseif k == "source" or k == "target" or k == "distance" or k == "flags" then
      error("gpuroute: ExtractionSegment." .. k .. " is read-only (a const member in osrm-extract)", 2)
    else
      bad_field("ExtractionSegment", k)
    end
  end,
  __name = "ExtractionSegment",
})

-- ------------------------------------------------------------------------------------------ loading
local PROFILE, FUNCS = nil, nil

-- run the profile file the way osrm-extract does; returns ok, err... or ok, api_version
function M.load(path, folder)
  package.path = folder .. "/?.lua;" .. package.path
  local chunk, msg = loadfile(path, "t")
  if chunk == nil then return false, {msg, false, false, msg} end
  local ok, ret = xpcall(chunk, handler)
  if not ok then return false, ret end
  properties = nil
  local v = api_version
  if mtype(v) == "float" and v == mfloor(v) then v = mfloor(v) end
  if mtype(v) ~= "integer" then v = 0 end
  return true, v, ret
end

-- after the version check: osrm-extract's initV2Context
function M.setup(ret)
  if type(ret) ~= "table" then
    return false, {"Profile must return a function table.", false, false, ""}
  end
  raster = RASTER
  constants = {precision = 1000000.0, max_turn_weight = 32767}
  local setup = ret.setup
  if type(setup) ~= "function" then
    return false, {"Profile must have an setup() function.", false, false, ""}
  end
  local ok, profile = xpcall(setup, handler)
  if not ok then return false, profile end
  if type(profile) ~= "table" then
    return false, {"Profile setup() must return a table.", false, false, ""}
  end
  PROFILE, FUNCS = profile, ret
  local function fn(name)
    local f = ret[name]
    if f ~= nil and type(f) ~= "function" then
      return nil, name
    end
    return f
  end
  return true, profile, fn("process_node") ~= nil, fn("process_way") ~= nil, fn("process_turn") ~= nil,
         fn("process_segment") ~= nil
end

function M.set_traffic_signal_penalty(x)
  TRAFFIC_SIGNAL_PENALTY = f32(x)
end

-- ------------------------------------------------------------------------------------------ drivers
-- nodes, flat: id, lon, lat, ntags, k, v, ...   ->   true, (batch index, type, direction, duration, weight)...
function M.process_nodes(...)
  local a, n = {...}, select("#", ...)
  local fn = FUNCS.process_node
  NODE_OBSTACLES = {}
  PHASE = "node"
  local i, b = 1, 0
  while i <= n do
    local nt = a[i + 3]
    local tags = {}
    for j = i + 4, i + 3 + 2 * nt, 2 do
      local v = a[j + 1]
      if v ~= "" then tags[a[j]] = v end
    end
    NODE.id, NODE.lon, NODE.lat, NODE.tags, NODE.batch = a[i], a[i + 1], a[i + 2], tags, b
    i = i + 4 + 2 * nt
    local ok, err = xpcall(fn, handler, PROFILE, Node, ResultNode, Relations)
    if not ok then
      PHASE = "idle"
      return false, err, NODE.id
    end
    b = b + 1
  end
  PHASE = "idle"
  return true, unpack(NODE_OBSTACLES)
end

local F_WAY = 31
-- ways, flat: id, left_hand_traffic, ntags, k, v, ...   ->   true, 31 values per way
function M.process_ways(...)
  local a, n = {...}, select("#", ...)
  local fn = FUNCS.process_way
  local out, o = {}, 0
  PHASE = "way"
  local i, b = 1, 0
  while i <= n do
    local nt = a[i + 2]
    local tags = {}
    for j = i + 3, i + 2 + 2 * nt, 2 do
      local v = a[j + 1]
      if v ~= "" then tags[a[j]] = v end
    end
    WAY.id, WAY.lht, WAY.tags, WAY.batch, WAY.nodes = a[i], a[i + 1], tags, b, nil
    i = i + 3 + 2 * nt
    R, RC = {}, {}
    local ok, err = xpcall(fn, handler, PROFILE, Way, ResultWay, Relations)
    if not ok then
      PHASE = "idle"
      return false, err, WAY.id
    end
    local okc, fc = pcall(classes_string, R.forward_classes, "forward_classes")
    local okb, bc = pcall(classes_string, R.backward_classes, "backward_classes")
    if not (okc and okb) then
      PHASE = "idle"
      local msg = okc and bc or fc
      return false, {msg, false, false, msg}, WAY.id
    end
    local d, r, rc = WAY_DEFAULTS, R, RC
    local function g(k) local v = r[k] if v == nil then v = d[k] end return v end
    local function gc(k) local v = rc[k] if v == nil then v = RC_DEFAULTS[k] end return v end
    out[o + 1], out[o + 2], out[o + 3], out[o + 4] = g("forward_mode"), g("backward_mode"), g("forward_speed"), g("backward_speed")
    out[o + 5], out[o + 6], out[o + 7], out[o + 8] = g("forward_rate"), g("backward_rate"), g("duration"), g("weight")
    out[o + 9], out[o + 10], out[o + 11], out[o + 12] = g("name"), g("forward_ref"), g("backward_ref"), g("pronunciation")
    out[o + 13], out[o + 14], out[o + 15], out[o + 16] = g("destinations"), g("exits"), g("turn_lanes_forward"), g("turn_lanes_backward")
    out[o + 17], out[o + 18], out[o + 19], out[o + 20] = g("roundabout"), g("circular"), g("is_startpoint"), g("forward_restricted")
    out[o + 21], out[o + 22], out[o + 23], out[o + 24] = g("backward_restricted"), g("is_left_hand_driving"), g("highway_turn_classification"), g("access_turn_classification")
    out[o + 25], out[o + 26], out[o + 27], out[o + 28] = gc("motorway_class"), gc("link_class"), gc("may_be_ignored"), gc("road_priority_class")
    out[o + 29], out[o + 30], out[o + 31] = gc("num_lanes"), fc, bc
    o = o + F_WAY
    b = b + 1
  end
  PHASE = "idle"
  return true, unpack(out, 1, o)
end

-- turns, flat: the 27 fields of TURN_READ per turn   ->   true, duration, weight per turn
local FALLBACK_TO_DURATION, MAX_TURN_WEIGHT = true, 3276.7
function M.set_turn_properties(fallback, max_turn_weight)
  FALLBACK_TO_DURATION, MAX_TURN_WEIGHT = fallback, max_turn_weight
end

local MIN_TURN_DURATION = -3276.7
function M.process_turns(...)
  local a, n = {...}, select("#", ...)
  local fn = FUNCS.process_turn
  need_prepared("any (computing turn.has_traffic_light)")
  local out, o = {}, 0
  PHASE = "turn"
  local b = 0
  for i = 1, n, N_TURN do
    local t = {_batch = b, duration = 0.0, weight = 0.0}
    for j = 1, N_TURN do t[TURN_READ[j]] = a[i + j - 1] end
    t.has_traffic_light = #obstacles_get(t.from, t.via, obstacle_type.traffic_signals) > 0
    T = t
    local duration, weight = 0.0, 0.0
    if fn ~= nil then
      local ok, err = xpcall(fn, handler, PROFILE, ExtractionTurn)
      if not ok then
        PHASE = "idle"
        return false, err, b
      end
      duration = t.duration
      if FALLBACK_TO_DURATION then
        weight = duration
      else
        weight = mmin(t.weight, MAX_TURN_WEIGHT)
      end
    end
    out[o + 1], out[o + 2] = mmax(duration, MIN_TURN_DURATION), weight
    o = o + 2
    b = b + 1
  end
  PHASE = "idle"
  return true, unpack(out, 1, o)
end

-- segments, flat (21 values): source lon, lat, target lon, lat, distance, weight, duration, then the flags
-- forward, backward, is_split, roundabout, circular, startpoint, restricted, highway_turn_classification,
-- access_turn_classification, then road_classification's motorway_class, link_class, may_be_ignored,
-- road_priority_class, num_lanes   ->   true, duration, weight per segment
local N_SEG = 21
local SEG_FLAGS = {"forward", "backward", "is_split", "roundabout", "circular", "startpoint", "restricted",
                   "highway_turn_classification", "access_turn_classification"}
local SEG_RC = {"motorway_class", "link_class", "may_be_ignored", "road_priority_class", "num_lanes"}
local SegRC = {}
local SegRoadClassification = setmetatable({}, {
  __index = function(_, k) return SegRC[k] end,
  __newindex = function(_, k) error("gpuroute: RoadClassification." .. tostring(k)
                                    .. " is read-only here (a copy of the segment's flags)", 2) end,
  __name = "RoadClassification",
})
function M.process_segments(...)
  local a, n = {...}, select("#", ...)
  local fn = FUNCS.process_segment
  local out, o = {}, 0
  PHASE = "segment"
  local b = 0
  for i = 1, n, N_SEG do
    local flags = {road_classification = SegRoadClassification}
    for j = 1, #SEG_FLAGS do flags[SEG_FLAGS[j]] = a[i + 6 + j] end
    SegRC = {}
    for j = 1, #SEG_RC do SegRC[SEG_RC[j]] = a[i + 15 + j] end
    S = {source = setmetatable({lon = a[i], lat = a[i + 1]}, Coordinate),
         target = setmetatable({lon = a[i + 2], lat = a[i + 3]}, Coordinate),
         distance = a[i + 4], weight = a[i + 5], duration = a[i + 6], flags = flags}
    if fn ~= nil then
      local ok, err = xpcall(fn, handler, PROFILE, ExtractionSegment)
      if not ok then
        PHASE = "idle"
        return false, err, b
      end
    end
    out[o + 1], out[o + 2] = S.duration, S.weight
    o = o + 2
    b = b + 1
  end
  PHASE = "idle"
  return true, unpack(out, 1, o)
end

return M
